package probe

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/api"
	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// UnknownServerError is NewOptions' error for a request naming a server
// the configuration does not have.
type UnknownServerError struct{ Name string }

func (e *UnknownServerError) Error() string {
	return fmt.Sprintf("no server named %q (see 'mcpx servers')", e.Name)
}

// forServer are the options of a probe of a configured server: its URL,
// headers, TLS CA file, transport, protocol and OAuth settings.
func forServer(s config.Server) (Options, error) {
	hdrs, err := s.ResolvedHeaders()
	if err != nil {
		return Options{}, err
	}
	o := Options{
		ServerName: s.Name,
		Target:     s.URL,
		Transport:  s.EffectiveTransport(),
		Protocol:   s.EffectiveProtocol(),
		Headers:    make(map[string]string, len(s.Headers)),
		OAuth:      s.OAuth.Overrides(),
	}
	for k, v := range hdrs {
		o.Headers[k] = v
	}
	if s.TLS != nil {
		o.CAFile = s.TLS.CAFile
	}
	if s.OAuth != nil {
		o.OAuthClientID = s.OAuth.ClientID
		if o.OAuthClientID == "" {
			o.OAuthClientID = s.OAuth.ClientMetadataURL
		}
		o.AllowMissingPKCE = s.OAuth.AllowMissingPKCEMethods
	}
	return o, nil
}

// CheckRequest reports what is wrong with a request before any server is
// looked up; the error never holds a header value or the target.
func CheckRequest(req api.ProbeRequest) error {
	switch {
	case req.Target == "" && req.Server == "":
		return errors.New("give a target URL or a configured server")
	case req.Target != "" && req.Server != "":
		return errors.New("give a target URL or a configured server, not both")
	}
	switch req.Transport {
	case "", TransportStreamableHTTP, TransportSSE:
	default:
		return fmt.Errorf("transport must be streamable-http or sse, not %q", req.Transport)
	}
	switch req.Protocol {
	case "", ProtocolAuto, ProtocolLegacy, ProtocolModern:
	default:
		return fmt.Errorf("protocol must be auto, legacy or modern, not %q", req.Protocol)
	}
	if req.TimeoutMS < 0 || req.OverallMS < 0 {
		return errors.New("timeouts must not be negative")
	}
	if maxMS := (24 * time.Hour).Milliseconds(); req.TimeoutMS > maxMS || req.OverallMS > maxMS {
		return fmt.Errorf("timeouts must be at most %d ms (24h)", maxMS)
	}
	return nil
}

// NewOptions resolves a request the same way wherever the probe runs: the
// named server's settings from lookup (the configuration of whoever runs
// the probe) first, then the request's own fields, which win.
func NewOptions(req api.ProbeRequest, lookup func(name string) (*config.Server, bool)) (Options, error) {
	if err := CheckRequest(req); err != nil {
		return Options{}, err
	}
	o := Options{Target: req.Target}
	if req.Server != "" {
		s, ok := lookup(req.Server)
		if !ok {
			return Options{}, &UnknownServerError{Name: req.Server}
		}
		if s.URL == "" {
			return Options{}, fmt.Errorf("server %q has no URL (transport %s): probe checks network servers only", s.Name, s.EffectiveTransport())
		}
		var err error
		if o, err = forServer(*s); err != nil {
			return Options{}, err
		}
	}
	for k, v := range req.Headers {
		if o.Headers == nil {
			o.Headers = map[string]string{}
		}
		o.Headers[k] = v
	}
	if req.CAFile != "" {
		o.CAOnlyHere = req.Server != "" && o.CAFile != req.CAFile
		o.CAFile = req.CAFile
	}
	if req.Transport != "" {
		o.Transport = req.Transport
	}
	if req.Protocol != "" {
		o.Protocol = req.Protocol
	}
	o.Timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	o.Overall = time.Duration(req.OverallMS) * time.Millisecond
	return o, nil
}
