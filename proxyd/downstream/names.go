package downstream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxNameLen is the longest exposed name; many LLM clients reject longer
// tool names although MCP allows 128.
const MaxNameLen = 64

// ExposedName is the name clients see for an upstream tool or prompt:
// the server's prefix and the upstream's name. Names keep to MCP's rules
// ([A-Za-z0-9_.-]); invalid characters become "_" and names over
// MaxNameLen are shortened, both with a stable hash suffix (of the server
// and the original name) that keeps names ending up alike apart.
func ExposedName(server, prefix, name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	full := prefix + b.String()
	if full != "" && len(full) <= MaxNameLen && b.String() == name {
		return full
	}
	sum := sha256.Sum256([]byte(server + "\x00" + name))
	suffix := "-" + hex.EncodeToString(sum[:3])
	if len(full)+len(suffix) > MaxNameLen {
		full = full[:MaxNameLen-len(suffix)]
	}
	return full + suffix
}

// Entry is the upstream tool or prompt behind an exposed name.
type Entry struct {
	Server string
	Name   string // the upstream's own name
}

// Omission is an upstream tool or prompt that is not exposed because an
// earlier server (in configuration order) already exposes its name.
type Omission struct {
	Server  string
	Kind    string // "tool" or "prompt"
	Name    string // the upstream's own name
	Exposed string
	Holder  string // the server that keeps the name
}

func (o Omission) String() string {
	return fmt.Sprintf("%s %q is left out: the name %q is already exposed by server %q (give one of the servers a different prefix)",
		o.Kind, o.Name, o.Exposed, o.Holder)
}

// Naming says which upstream tool or prompt answers to each exposed name,
// and which server serves each listed resource URI.
type Naming struct {
	Tools   map[string]Entry
	Prompts map[string]Entry
	// Resources maps a URI to the server that serves it: a URI two
	// servers list is the first's (URIs are not prefixed).
	Resources map[string]string
	Omitted   []Omission
}

// Name assigns exposed names to the upstreams' tools and prompts, and
// resource URIs to servers, taking the upstreams in order: a name already
// taken is left to its first holder and the later tool or prompt is
// omitted; a URI already listed stays the first server's.
func Name(ups []Upstream) Naming {
	n := Naming{Tools: map[string]Entry{}, Prompts: map[string]Entry{}, Resources: map[string]string{}}
	take := func(names map[string]Entry, u Upstream, kind, name string) {
		exposed := ExposedName(u.Name, u.Prefix, name)
		if held, taken := names[exposed]; taken {
			n.Omitted = append(n.Omitted, Omission{Server: u.Name, Kind: kind, Name: name, Exposed: exposed, Holder: held.Server})
			return
		}
		names[exposed] = Entry{Server: u.Name, Name: name}
	}
	for _, u := range ups {
		for _, t := range u.Tools {
			take(n.Tools, u, "tool", t.Name)
		}
		for _, p := range u.Prompts {
			take(n.Prompts, u, "prompt", p.Name)
		}
		for _, r := range u.Resources {
			if _, taken := n.Resources[r.URI]; !taken {
				n.Resources[r.URI] = u.Name
			}
		}
	}
	return n
}

// Tool returns the exposed name of server's tool and whether it is
// exposed (false when another server holds the name).
func (n Naming) Tool(u Upstream, name string) (string, bool) {
	exposed := ExposedName(u.Name, u.Prefix, name)
	return exposed, n.Tools[exposed] == Entry{Server: u.Name, Name: name}
}

// Prompt is Tool for prompts.
func (n Naming) Prompt(u Upstream, name string) (string, bool) {
	exposed := ExposedName(u.Name, u.Prefix, name)
	return exposed, n.Prompts[exposed] == Entry{Server: u.Name, Name: name}
}

// OmittedBy lists the omissions of one server, as messages.
func (n Naming) OmittedBy(server string) []string {
	var out []string
	for _, o := range n.Omitted {
		if o.Server == server {
			out = append(out, o.String())
		}
	}
	return out
}

// Prefixed is a server and the prefix of its exposed names.
type Prefixed struct {
	Server, Prefix string
}

// Owner guesses which server an exposed name that no tool answers to was
// meant for, so that the refused call is recorded against it: the server
// with the longest non-empty prefix the name starts with, else the only
// server without a prefix. ok is false when no server fits.
func Owner(exposed string, servers []Prefixed) (server, name string, ok bool) {
	best, bare, bares := -1, -1, 0
	for i, s := range servers {
		switch {
		case s.Prefix == "":
			bare, bares = i, bares+1
		case strings.HasPrefix(exposed, s.Prefix) && len(exposed) > len(s.Prefix) &&
			(best < 0 || len(s.Prefix) > len(servers[best].Prefix)):
			best = i
		}
	}
	switch {
	case best >= 0:
		return servers[best].Server, exposed[len(servers[best].Prefix):], true
	case bares == 1:
		return servers[bare].Server, exposed, true
	}
	return "", exposed, false
}
