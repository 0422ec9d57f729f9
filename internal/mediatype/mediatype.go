// Package mediatype reads the media type of a Content-Type header on the
// relay path, where every request and answer has one.
package mediatype

import "mime"

// Of is the media type of the Content-Type value v, lower case and without
// parameters ("" when v is malformed), as mime.ParseMediaType gives it;
// the two types MCP uses, written plainly, are returned without parsing.
func Of(v string) string {
	switch v {
	case "application/json", "text/event-stream":
		return v
	}
	mt, _, _ := mime.ParseMediaType(v)
	return mt
}
