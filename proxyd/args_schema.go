package proxyd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpx-dev/mcpx/proxyd/callerr"
	"github.com/mcpx-dev/mcpx/proxyd/upstream"
)

// The command line's calls are checked against the tool's input schema
// before they are sent: a mismatch is the caller's fault and says so in
// the schema's words. MCP clients' calls go to the server as they came
// (the server is the judge of its own arguments).

type schemaCheckKey struct{}

// withSchemaCheck marks ctx's call for checking by checkArgs.
func withSchemaCheck(ctx context.Context) context.Context {
	return context.WithValue(ctx, schemaCheckKey{}, true)
}

// checkArgs refuses arguments that do not match tool's input schema, for
// calls marked by withSchemaCheck. A schema that does not compile is not
// the caller's fault: the call goes as it is.
func checkArgs(ctx context.Context, conn *upstream.Conn, tool string, args json.RawMessage) error {
	if ctx.Value(schemaCheckKey{}) == nil {
		return nil
	}
	t, ok := conn.Tool(tool)
	if !ok || len(t.RawInputSchema) == 0 {
		return nil
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	msg, err := validateArgs(t.RawInputSchema, args)
	if err != nil || msg == "" {
		return nil
	}
	return &callerr.RefusedError{Reason: fmt.Sprintf("arguments do not match the input schema of %q: %s", tool, msg)}
}

// validateArgs is "" when args satisfy schema, else the schema's words
// for every mismatch; err when the schema itself cannot be used.
func validateArgs(schema, args json.RawMessage) (string, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return "", err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mcpx:input-schema.json", doc); err != nil {
		return "", err
	}
	sch, err := c.Compile("mcpx:input-schema.json")
	if err != nil {
		return "", err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return "", err
	}
	var verr *jsonschema.ValidationError
	if err := sch.Validate(inst); !errors.As(err, &verr) {
		return "", err
	}
	var out []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			where := strings.TrimPrefix(u.InstanceLocation, "/")
			if where != "" {
				where = strings.ReplaceAll(where, "/", ".") + ": "
			}
			out = append(out, where+u.Error.String())
		}
		for _, e := range u.Errors {
			walk(e)
		}
	}
	walk(*verr.BasicOutput())
	if len(out) == 0 {
		out = append(out, verr.Error())
	}
	return strings.Join(out, "; "), nil
}
