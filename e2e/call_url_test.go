package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpx-dev/mcpx/fixtures/mcpserver"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// A server that needs the user at a URL first answers -32042 with the
// URLs in the error's data: mcpx call shows them (the message alone only
// counts them) and gives the code and the data in JSON, its secrets
// redacted.
func TestCallShowsTheURLsAServerAsks(t *testing.T) {
	fx := startFixture(t, mcpserver.EraLegacy)
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf("listen: 127.0.0.1:0\nservers:\n  - name: fixture\n    url: %s\n    protocol: legacy\n", fx.URL()))
	e.startProxyd()
	e.waitServer("fixture", api.StateReady)

	const canary = "tok-canary-5f2c9e"
	data := `{"elicitations":[{"mode":"url","url":"https://127.0.0.1:9/consent?access_token=` + canary + `&x=1","message":"Grant access to the calendar","elicitationId":"e-1"}]}`
	for _, output := range []string{"table", "json"} {
		if _, err := fx.AddFault(mcpserver.Fault{Kind: mcpserver.FaultJSONRPCError, Tool: "echo", Count: 1, Code: -32042,
			Message: "URL elicitation required: 1 elicitation(s) needed", Data: json.RawMessage(data)}); err != nil {
			t.Fatal(err)
		}
		if output == "json" {
			var resp api.CallResponse
			r := e.runJSON(4, &resp, "call", "fixture", "echo", "text=x")
			if resp.Error == nil || resp.Error.JSONRPCCode != -32042 || !strings.Contains(string(resp.Error.JSONRPCData), "https://127.0.0.1:9/consent?access_token=[REDACTED]") {
				t.Errorf("-o json: error %+v\n%s", resp.Error, r)
			}
			if strings.Contains(r.stdout+r.stderr, canary) {
				t.Errorf("-o json printed the URL's token\n%s", r)
			}
			continue
		}
		r := e.run("call", "fixture", "echo", "text=x")
		if r.code != 4 || !strings.Contains(r.stderr, "the server asks you to open https://127.0.0.1:9/consent?access_token=[REDACTED]&x=1 (Grant access to the calendar)") ||
			!strings.Contains(r.stderr, "then call again") {
			t.Errorf("the URL the server asks for is not shown\n%s", r)
		}
		if strings.Contains(r.stdout+r.stderr, canary) {
			t.Errorf("the URL's token was printed\n%s", r)
		}
	}
}
