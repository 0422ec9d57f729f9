package proxyd

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"sync/atomic"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// secretName is a variable or header name that says its value is a
// credential, whatever its length.
var secretName = regexp.MustCompile(`(?i)token|secret|key|pass|auth|credential|private|cookie|session`)

// minSecretLen: a shorter value of a name that does not say it is a
// credential ("warn", "infra", "8080") is left alone, since replacing it
// everywhere would blank out ordinary words; credentials are longer.
const minSecretLen = 8

// configSecrets are the values proxyd must never print, log or store that
// the config holds: header values and environment values of the servers
// (a stdio child may echo its environment on stderr), client secrets,
// and credentials in server URLs.
func configSecrets(cfg *config.Config) []string {
	var out []string
	named := func(name, v string) {
		if len(v) >= minSecretLen || secretName.MatchString(name) {
			out = append(out, v)
		}
	}
	for _, s := range cfg.Servers {
		for k, v := range s.Headers {
			named(k, v)
		}
		for k, v := range s.Env {
			named(k, v)
		}
		if s.OAuth != nil && s.OAuth.ClientSecret != "" {
			out = append(out, s.OAuth.ClientSecret)
		}
		if u, err := url.Parse(s.URL); err == nil {
			out = append(out, redact.URLSecrets(u)...)
		}
	}
	return out
}

// secrets is the daemon's current redaction set, replaced on every config
// change; the logger and every text proxyd shows or stores go through it.
type secrets struct {
	set atomic.Pointer[redact.Secrets]
}

func (s *secrets) use(cfg *config.Config) { s.set.Store(redact.NewSecrets(configSecrets(cfg)...)) }

// text redacts s: known secrets, credential patterns, control sequences.
func (s *secrets) text(str string) string { return s.set.Load().Text(str) }

// err returns err with its message redacted and its chain kept, so that
// classification still sees the types.
func (s *secrets) err(err error) error {
	if err == nil {
		return nil
	}
	if msg := s.text(err.Error()); msg != err.Error() {
		return redactedError{msg: msg, err: err}
	}
	return err
}

// redactingHandler redacts every log record's message and attributes.
type redactingHandler struct {
	next slog.Handler
	s    *secrets
}

func (h redactingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.s.text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h redactingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return redactingHandler{next: h.next.WithAttrs(red), s: h.s}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{next: h.next.WithGroup(name), s: h.s}
}

func (h redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.s.text(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = h.attr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.s.text(err.Error()))
		}
		if st, ok := v.Any().(interface{ String() string }); ok {
			return slog.String(a.Key, h.s.text(st.String()))
		}
	}
	return a
}
