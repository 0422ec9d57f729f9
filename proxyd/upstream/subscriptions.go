package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Resource subscriptions: proxyd holds one upstream subscription per URI
// for all its clients (counted), and the connection keeps them across
// reconnects and re-established sessions. A legacy upstream gets
// resources/subscribe and resources/unsubscribe; a modern upstream a
// subscriptions/listen stream whose filter names the URIs (and the list
// changes proxyd follows), reopened when the set changes.

// Subscribe adds a subscriber of uri, subscribing upstream for the first.
func (c *Conn) Subscribe(ctx context.Context, uri string) error {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs[uri] > 0 {
		c.subs[uri]++
		return nil
	}
	if c.Modern() {
		c.subs[uri] = 1
		c.listen()
		return nil
	}
	if err := c.subscribeLegacy(ctx, mcp.MethodResourcesSubscribe, uri); err != nil {
		return err
	}
	c.subs[uri] = 1
	return nil
}

// Unsubscribe removes a subscriber of uri, unsubscribing upstream after
// the last.
func (c *Conn) Unsubscribe(ctx context.Context, uri string) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs[uri] == 0 {
		return
	}
	if c.subs[uri]--; c.subs[uri] > 0 {
		return
	}
	delete(c.subs, uri)
	if c.Modern() {
		c.listen()
		return
	}
	if err := c.subscribeLegacy(ctx, mcp.MethodResourcesUnsubscribe, uri); err != nil {
		c.opts.logger().Debug("resources/unsubscribe", "server", c.name, "uri", uri, "err", err)
	}
}

func (c *Conn) subscribeLegacy(ctx context.Context, method mcp.MCPMethod, uri string) error {
	params, err := json.Marshal(map[string]string{"uri": uri})
	if err != nil {
		return err
	}
	return c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		c.mu.RLock()
		w := c.wire
		c.mu.RUnlock()
		_, err := rawRequest(ctx, cl, w, string(method), "", nil, params)
		return err
	})
}

// resubscribe restores the subscriptions on a new connection or session,
// and a modern upstream's listen stream.
func (c *Conn) resubscribe() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.Modern() {
		c.listen()
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	defer cancel()
	for uri := range c.subs {
		if err := c.subscribeLegacy(ctx, mcp.MethodResourcesSubscribe, uri); err != nil {
			c.opts.logger().Warn("re-subscribing to a resource", "server", c.name, "uri", uri, "err", err)
		}
	}
}

// listen (re)opens a modern upstream's subscriptions/listen stream with
// the current filter; under subMu.
func (c *Conn) listen() {
	c.mu.RLock()
	cl, caps := c.cl, c.caps
	c.mu.RUnlock()
	if c.stopListen != nil {
		c.stopListen()
		c.stopListen = nil
	}
	if cl == nil {
		return
	}
	var f mcp.SubscriptionFilter
	if caps.Tools != nil && caps.Tools.ListChanged {
		f.ToolsListChanged = true
	}
	if caps.Prompts != nil && caps.Prompts.ListChanged {
		f.PromptsListChanged = true
	}
	if caps.Resources != nil {
		f.ResourcesListChanged = caps.Resources.ListChanged
		if caps.Resources.Subscribe {
			for uri := range c.subs {
				f.ResourceSubscriptions = append(f.ResourceSubscriptions, uri)
			}
			sort.Strings(f.ResourceSubscriptions)
		}
	}
	if f.IsEmpty() {
		return
	}
	stop, err := cl.ListenAsync(c.ctx, f, func(err error) {
		c.opts.logger().Debug("subscriptions/listen ended", "server", c.name, "err", err)
	})
	if err != nil {
		c.opts.logger().Debug("subscriptions/listen not available", "server", c.name, "err", fmt.Sprint(err))
		return
	}
	c.stopListen = stop
}
