package downstream

import (
	"github.com/mark3labs/mcp-go/mcp"
)

// routes maps what clients name (exposed tool and prompt names, resource
// URIs) to the upstream that has it; replaced whole by Sync.
type routes struct {
	tools     map[string]route
	prompts   map[string]promptRoute
	resources map[string]string // URI to server
	templates []templateRoute
}

type route struct {
	server, tool string
	modern       bool // the upstream speaks the modern era
	// paramHeaders: a parameter is annotated with x-mcp-header, whose
	// Mcp-Param-* header must match the body.
	paramHeaders bool
	def          *mcp.Tool
}

type promptRoute struct {
	server, name string
}

type templateRoute struct {
	server   string
	template string
	uri      *mcp.URITemplate
}

func newRoutes() *routes {
	return &routes{tools: map[string]route{}, prompts: map[string]promptRoute{}, resources: map[string]string{}}
}

// resourceServer finds the server of a resource URI: a listed resource,
// else the first template that matches.
func (t *routes) resourceServer(uri string) (string, bool) {
	if srv, ok := t.resources[uri]; ok {
		return srv, true
	}
	for _, tr := range t.templates {
		if TemplateMatches(tr.uri, uri) {
			return tr.server, true
		}
	}
	return "", false
}

// TemplateMatches reports whether uri is one of the URIs template t
// describes (a resource template's, which may be absent).
func TemplateMatches(t *mcp.URITemplate, uri string) bool {
	return t != nil && t.Template != nil && t.Regexp().MatchString(uri)
}

// templateServer finds the server of a resource template by its template
// string (completion/complete names templates that way).
func (t *routes) templateServer(template string) (string, bool) {
	for _, tr := range t.templates {
		if tr.template == template {
			return tr.server, true
		}
	}
	return "", false
}
