package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/mcpx-dev/mcpx/internal/editdistance"
)

// source remembers where each parsed value sits in the file, so that
// Validate can point at it. Paths look like "servers[0].oauth.token_endpoint"
// and "servers[0].headers[X-Team]".
type source struct {
	file  string
	vals  map[string]pos // value positions
	keys  map[string]pos // key positions
	names []string       // server names by index when parsed
}

// at returns the position of path's value, else of the closest enclosing
// value the file has.
func (s *source) at(path string) pos {
	if s == nil {
		return pos{}
	}
	for p := path; p != ""; p = parentPath(p) {
		if v, ok := s.vals[p]; ok {
			return v
		}
	}
	return pos{}
}

// keyAt returns the position of path's key, else of its value.
func (s *source) keyAt(path string) pos {
	if s != nil {
		if v, ok := s.keys[path]; ok {
			return v
		}
	}
	return s.at(path)
}

func (s *source) has(path string) bool {
	if s == nil {
		return false
	}
	_, ok := s.keys[path]
	return ok
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

type kind int

const (
	kString kind = iota
	kBool
	kInt
	kDuration
	kStringList
	kStringMap
	kObject
	kServerList
)

type field struct {
	kind    kind
	example string // shown in hints: how to write the key
	sub     map[string]field
}

var (
	tlsFields = map[string]field{
		"ca_file": {kind: kString, example: "ca_file: /path/to/ca.pem"},
	}
	identityProviderFields = map[string]field{
		"issuer":         {kind: kString, example: "issuer: https://idp.example.com"},
		"token_endpoint": {kind: kString, example: "token_endpoint: https://idp.example.com/oauth2/token"},
		"client_id":      {kind: kString, example: "client_id: mcp-client-at-idp"},
		"client_secret":  {kind: kString, example: "client_secret: ${env:IDP_CLIENT_SECRET}"},
		"id_token":       {kind: kString, example: "id_token: ${file:/run/user/id_token}"},
	}
	oauthFields = map[string]field{
		"grant":                      {kind: kString, example: "grant: client_credentials"},
		"client_id":                  {kind: kString, example: "client_id: my-client"},
		"client_secret":              {kind: kString, example: "client_secret: ${env:MCP_CLIENT_SECRET}"},
		"private_key":                {kind: kString, example: "private_key: ${file:/etc/mcpx/client-key.pem}"},
		"token_endpoint_auth_method": {kind: kString, example: "token_endpoint_auth_method: private_key_jwt"},
		"assertion":                  {kind: kString, example: "assertion: ${file:/var/run/secrets/tokens/mcp}"},
		"identity_provider":          {kind: kObject, example: "identity_provider: {issuer: https://idp.example.com, client_id: c, id_token: ${file:/run/id_token}}", sub: identityProviderFields},
		"dpop":                       {kind: kBool, example: "dpop: true"},
		"scopes":                     {kind: kStringList, example: "scopes: [read, write]"},
		"authorization_endpoint":     {kind: kString, example: "authorization_endpoint: https://auth.example.com/authorize"},
		"token_endpoint":             {kind: kString, example: "token_endpoint: https://auth.example.com/token"},
		"registration_endpoint":      {kind: kString, example: "registration_endpoint: https://auth.example.com/register"},
		"auth_server_metadata_url":   {kind: kString, example: "auth_server_metadata_url: https://auth.example.com/.well-known/oauth-authorization-server"},
		"client_metadata_url":        {kind: kString, example: "client_metadata_url: https://app.example.com/client.json"},
		"allow_missing_pkce_methods": {kind: kBool, example: "allow_missing_pkce_methods: true"},
	}
	serverFields = map[string]field{
		"name":                {kind: kString, example: "name: docs"},
		"url":                 {kind: kString, example: "url: https://example.com/mcp"},
		"transport":           {kind: kString, example: "transport: streamable-http"},
		"protocol":            {kind: kString, example: "protocol: auto"},
		"prefix":              {kind: kString, example: `prefix: "gh_"`},
		"headers":             {kind: kStringMap, example: "headers: {X-Team: infra}"},
		"tls":                 {kind: kObject, example: "tls: {ca_file: /path/to/ca.pem}", sub: tlsFields},
		"oauth":               {kind: kObject, example: "oauth: {client_id: my-client}", sub: oauthFields},
		"command":             {kind: kString, example: "command: npx"},
		"args":                {kind: kStringList, example: `args: ["-y", "@modelcontextprotocol/server-everything"]`},
		"env":                 {kind: kStringMap, example: "env: {LOG_LEVEL: warn}"},
		"disabled":            {kind: kBool, example: "disabled: true"},
		"timeout":             {kind: kDuration, example: "timeout: 60s"},
		"max_response_bytes":  {kind: kInt, example: "max_response_bytes: 16777216"},
		"stream_idle_timeout": {kind: kDuration, example: "stream_idle_timeout: 5m"},
	}
	activityFields = map[string]field{
		"max_age":    {kind: kDuration, example: "max_age: 720h"},
		"max_rows":   {kind: kInt, example: "max_rows: 1000000"},
		"durability": {kind: kString, example: "durability: sync"},
	}
	stateFields = map[string]field{
		"postgres": {kind: kString, example: "postgres: postgres://mcpx@db.example:5432/mcpx"},
	}
	rootFields = map[string]field{
		"metrics_listen": {kind: kString, example: "metrics_listen: 127.0.0.1:9464"},
		"state":          {kind: kObject, example: "state: {postgres: postgres://mcpx@db.example:5432/mcpx}", sub: stateFields},
		"listen":         {kind: kString, example: "listen: " + DefaultListen},
		"activity":       {kind: kObject, example: "activity: {max_age: 720h, max_rows: 1000000}", sub: activityFields},
		"limits":         {kind: kObject, example: "limits: {max_request_bytes: 4194304}", sub: limitsFields},
		"servers":        {kind: kServerList, example: "servers: [{name: docs, url: https://example.com/mcp}]"},
	}
)

// decode parses data into a Config without validating values. Syntax,
// unknown keys and wrong types are reported here.
func decode(file string, data []byte) (*Config, error) {
	src := &source{file: file, vals: map[string]pos{}, keys: map[string]pos{}}
	c := &Config{src: src}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, fromYAMLError(file, err)
	}
	var body ast.Node
	for i, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			return nil, &Error{File: file, Line: tokenPos(doc.Body.GetToken()).line, Column: tokenPos(doc.Body.GetToken()).col,
				Msg: fmt.Sprintf("config holds more than one YAML document (document %d)", i+1), Hint: "keep one document: remove the extra '---' and what follows"}
		}
		body = doc.Body
	}
	if body == nil {
		return c, nil // empty or comments only
	}
	w := &walker{src: src}
	w.object(body, "", rootFields, "")
	if len(w.errs) > 0 {
		return nil, joinErrors(w.errs)
	}
	if err := yaml.NodeToValue(body, c, yaml.Strict()); err != nil {
		return nil, fromYAMLError(file, err)
	}
	c.src = src
	src.names = make([]string, len(c.Servers))
	for i, s := range c.Servers {
		src.names[i] = s.Name
	}
	return c, nil
}

// walker checks the document's shape against the schema and records
// positions. It leaves decoding to the library, whose messages name Go
// types; the walker's name keys and show how to write them.
type walker struct {
	src  *source
	errs []*Error
}

func (w *walker) fail(p pos, hint, format string, args ...any) {
	w.errs = append(w.errs, &Error{File: w.src.file, Line: p.line, Column: p.col, Msg: fmt.Sprintf(format, args...), Hint: hint})
}

// unwrap looks through anchors and tags. An alias is left for the library
// to resolve.
func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		default:
			return n
		}
	}
}

// nodePos is where a value starts: a mapping's first key, or at for a
// null (which has no text of its own).
func nodePos(n ast.Node, at pos) pos {
	if _, null := n.(*ast.NullNode); null {
		return at
	}
	if values, ok := mappingValues(n); ok && len(values) > 0 && values[0].Key != nil {
		return tokenPos(values[0].Key.GetToken())
	}
	if p := tokenPos(n.GetToken()); p.line > 0 {
		return p
	}
	return at
}

func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.NullNode:
		return "nothing"
	case *ast.BoolNode:
		return "a boolean"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	default:
		return "a string"
	}
}

func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}, true
	}
	return nil, false
}

func isScalar(n ast.Node) bool {
	_, ok := n.(ast.ScalarNode)
	return ok
}

func scalarText(n ast.Node) string {
	if s, ok := n.(*ast.StringNode); ok {
		return s.Value
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}

func keyText(k ast.MapKeyNode) string {
	if s, ok := unwrap(k).(*ast.StringNode); ok {
		return s.Value
	}
	if tk := k.GetToken(); tk != nil {
		return tk.Value
	}
	return k.String()
}

func (w *walker) object(n ast.Node, path string, fields map[string]field, where string) {
	n = unwrap(n)
	switch n.(type) {
	case *ast.AliasNode, *ast.NullNode:
		return
	}
	values, ok := mappingValues(n)
	if !ok {
		what := where
		if path == "" {
			what = "the file"
		}
		w.fail(tokenPos(n.GetToken()), "write it as key: value pairs, one per line",
			"%s must be a mapping, got %s", what, describe(n))
		return
	}
	for _, mv := range values {
		if mv.Key == nil || mv.Key.IsMergeKey() {
			continue
		}
		name := keyText(mv.Key)
		kp := tokenPos(mv.Key.GetToken())
		child := name
		if path != "" {
			child = path + "." + name
		}
		f, known := fields[name]
		if !known {
			w.fail(kp, unknownKeyHint(name, fields), "unknown key %q %s", name, inWhere(where))
			continue
		}
		w.src.keys[child] = kp
		v := unwrap(mv.Value)
		w.src.vals[child] = nodePos(v, kp)
		if _, alias := v.(*ast.AliasNode); alias {
			continue
		}
		w.value(v, child, name, f, where)
	}
}

func (w *walker) value(v ast.Node, path, name string, f field, where string) {
	vp := tokenPos(v.GetToken())
	wrong := func(want string) {
		w.fail(vp, "write it as `"+f.example+"`", "%s%s must be %s, got %s", prefix(where), name, want, describe(v))
	}
	_, null := v.(*ast.NullNode)
	switch f.kind {
	case kString:
		if !isScalar(v) {
			wrong("a string")
		}
	case kBool:
		if _, ok := v.(*ast.BoolNode); !ok && !null {
			wrong("true or false")
		}
	case kInt:
		if _, ok := v.(*ast.IntegerNode); !ok && !null {
			wrong("a whole number")
		}
	case kDuration:
		if null {
			return
		}
		if !isScalar(v) {
			wrong("a duration")
			return
		}
		if _, err := ParseDuration(scalarText(v)); err != nil {
			w.fail(vp, "use a number with a unit, e.g. 30s, 5m, 1h or 30d", "%s%s: %v", prefix(where), name, err)
		}
	case kStringList:
		if null {
			return
		}
		seq, ok := v.(*ast.SequenceNode)
		if !ok {
			wrong("a list of strings")
			return
		}
		for i, e := range seq.Values {
			e = unwrap(e)
			ep := fmt.Sprintf("%s[%d]", path, i)
			w.src.vals[ep] = tokenPos(e.GetToken())
			if _, alias := e.(*ast.AliasNode); alias {
				continue
			}
			if _, isNull := e.(*ast.NullNode); isNull || !isScalar(e) {
				w.fail(tokenPos(e.GetToken()), "write it as `"+f.example+"`", "%s%s must be a list of strings, item %d is %s", prefix(where), name, i+1, describe(e))
			}
		}
	case kStringMap:
		if null {
			return
		}
		values, ok := mappingValues(v)
		if !ok {
			wrong("a mapping of names to strings")
			return
		}
		for _, mv := range values {
			if mv.Key == nil || mv.Key.IsMergeKey() {
				continue
			}
			k := keyText(mv.Key)
			ep := fmt.Sprintf("%s[%s]", path, k)
			w.src.keys[ep] = tokenPos(mv.Key.GetToken())
			e := unwrap(mv.Value)
			w.src.vals[ep] = tokenPos(e.GetToken())
			if _, alias := e.(*ast.AliasNode); alias {
				continue
			}
			if !isScalar(e) {
				w.fail(tokenPos(e.GetToken()), "write it as `"+f.example+"`", "%s%s: value of %q must be a string, got %s", prefix(where), name, k, describe(e))
			}
		}
	case kObject:
		sub := name
		if where != "" {
			sub += " of " + where
		}
		w.object(v, path, f.sub, sub)
	case kServerList:
		if null {
			return
		}
		seq, ok := v.(*ast.SequenceNode)
		if !ok {
			wrong("a list of servers")
			return
		}
		for i, e := range seq.Values {
			e = unwrap(e)
			ep := fmt.Sprintf("%s[%d]", path, i)
			dash := tokenPos(e.GetToken())
			if i < len(seq.Entries) {
				dash = tokenPos(seq.Entries[i].Start)
			}
			w.src.vals[ep] = nodePos(e, dash)
			if _, alias := e.(*ast.AliasNode); alias {
				continue
			}
			w.object(e, ep, serverFields, serverWhere(serverNameOf(e), i))
		}
	}
}

// serverNameOf reads the entry's name early, so errors about its other
// keys can say which server they are in.
func serverNameOf(n ast.Node) string {
	values, _ := mappingValues(unwrap(n))
	for _, mv := range values {
		if mv.Key != nil && keyText(mv.Key) == "name" && isScalar(unwrap(mv.Value)) {
			return scalarText(unwrap(mv.Value))
		}
	}
	return ""
}

func serverWhere(name string, i int) string {
	if name != "" {
		return fmt.Sprintf("server %q", name)
	}
	return fmt.Sprintf("servers entry %d", i+1)
}

// prefix starts a message about a key inside where ("" is the top level).
func prefix(where string) string {
	if where == "" {
		return ""
	}
	return where + ": "
}

func inWhere(where string) string {
	if where == "" {
		return "at the top level"
	}
	return "in " + where
}

// unknownKeyHint suggests the closest known key, else lists them.
func unknownKeyHint(name string, fields map[string]field) string {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	best, bestD := "", 1<<30
	for _, k := range known {
		if d := editdistance.Levenshtein(strings.ToLower(name), k); d < bestD {
			best, bestD = k, d
		}
	}
	if bestD <= 2 || (bestD <= 3 && len(name) > 6) {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return "remove it; known keys here: " + strings.Join(known, ", ")
}
