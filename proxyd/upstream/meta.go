package upstream

import (
	"context"
	"encoding/json"
)

type metaKey struct{}

// WithMeta adds fields to the params._meta of the requests sent under ctx
// (the trace context a traced call passes on upstream).
func WithMeta(ctx context.Context, fields map[string]string) context.Context {
	if len(fields) == 0 {
		return ctx
	}
	return context.WithValue(ctx, metaKey{}, fields)
}

func metaFrom(ctx context.Context) map[string]string {
	m, _ := ctx.Value(metaKey{}).(map[string]string)
	return m
}

// joinMeta is the connection's _meta object with extra's fields added (nil
// when both are empty).
func joinMeta(base json.RawMessage, extra map[string]string) json.RawMessage {
	if len(extra) == 0 {
		return base
	}
	fields := map[string]json.RawMessage{}
	if len(base) > 0 {
		_ = json.Unmarshal(base, &fields)
	}
	for k, v := range extra {
		b, _ := json.Marshal(v)
		fields[k] = b
	}
	out, _ := json.Marshal(fields)
	return out
}

// Version is the protocol version negotiated with the server ("" before
// the first connection).
func (c *Conn) Version() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.version
}
