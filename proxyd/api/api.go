// Package api is proxyd's control API (HTTP/1.1 + JSON over a Unix
// socket, under /v1/): its wire types, which are the only definition of
// what travels (the daemon and the CLI both use them; golden tests pin the
// JSON), and the typed client every command uses, a method per endpoint.
// The JSON field names are a stable, additive-only contract.
package api

import "strings"

// ErrorBody is the one error shape: {"error": {"code": "...", "message": "..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of the control API.
const (
	CodeBadRequest = "bad_request"
	CodeNotFound   = "not_found"
	CodeForbidden  = "forbidden"
	CodeConflict   = "conflict"
	CodeInternal   = "internal"
	// CodeInvalidConfig: the config file is invalid (a reload kept the
	// running configuration).
	CodeInvalidConfig = "invalid_config"
	// CodeAuthRequired: the request needs a sign-in first.
	CodeAuthRequired = "auth_required"
	// CodeUnavailable: the server is not in a state to do what was asked
	// (not ready, nothing a drill can call).
	CodeUnavailable = "unavailable"
	// CodeNoRoute: this daemon has no such endpoint (an older version).
	CodeNoRoute = "no_route"
	// CodeTooLarge: the request body is over limits.max_request_bytes.
	CodeTooLarge = "too_large"
	// CodeStopping: proxyd is stopping and refused the request before
	// doing anything with it; the proxyd that replaces it can take it.
	CodeStopping = "stopping"
)

// SplitList reads a list filter of the activity API: values may be
// repeated (?server=a&server=b) or comma-separated (?server=a,b), and
// blanks are dropped. The CLI reads its repeatable flags the same way.
func SplitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
