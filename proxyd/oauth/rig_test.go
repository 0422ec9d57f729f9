package oauth

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/mcpx-dev/mcpx/fixtures/authserver"
	"github.com/mcpx-dev/mcpx/internal/pgtest"
	"github.com/mcpx-dev/mcpx/internal/syncbuf"
	"github.com/mcpx-dev/mcpx/proxyd/store"
	"github.com/mcpx-dev/mcpx/proxyd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openDB opens a new state database of engine (SQLite when none is named).
func openDB(tb testing.TB, engine ...string) *store.DB {
	tb.Helper()
	eng := store.EngineSQLite
	if len(engine) > 0 {
		eng = engine[0]
	}
	return storetest.Open(tb, eng)
}

// eachEngine runs fn against a new database of every state engine.
func eachEngine(t *testing.T, fn func(t *testing.T, eng string)) {
	for _, eng := range storetest.Engines {
		t.Run(eng, func(t *testing.T) { fn(t, eng) })
	}
}

// rig is a signed-in server: a fixture authorization server, a protected
// upstream that accepts only the server's live tokens, a store and a
// coordinator.
type rig struct {
	as       *authserver.Server
	upstream *httptest.Server
	store    *Store
	c        *Coordinator
	key      string
	logs     *syncbuf.Buffer
	flights  chan FlightInfo
	resource string
	client   *Client
	src      GrantSource // what the coordinator was given
}

type rigOpts struct {
	coord      CoordinatorOptions
	db         *store.DB // default: a new SQLite database
	configured bool      // a configured client instead of a registered one
	secret     string
}

func newRig(tb testing.TB, o rigOpts) *rig {
	tb.Helper()
	as, err := authserver.Start(authserver.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = as.Close() })
	r := &rig{as: as, logs: &syncbuf.Buffer{}, flights: make(chan FlightInfo, 4096)}
	r.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		const p = "Bearer "
		h := req.Header.Get("Authorization")
		if len(h) <= len(p) || !as.Validate(h[len(p):]) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	tb.Cleanup(r.upstream.Close)
	r.resource = r.upstream.URL + "/mcp"
	db := o.db
	if db == nil {
		db = openDB(tb)
	}
	r.store = NewStore(db)
	r.key = ServerKey("alpha", r.resource)

	r.client = &Client{ClientID: "client-alpha", ClientSecret: o.secret, Registered: !o.configured, RedirectURI: "http://127.0.0.1/callback"}
	as.AddClient(r.client.ClientID, o.secret, r.client.RedirectURI)

	opts := o.coord
	opts.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prev := opts.OnFlight
	opts.OnFlight = func(fi FlightInfo) {
		r.flights <- fi
		if prev != nil {
			prev(fi)
		}
	}
	r.c = NewCoordinator(r.store, opts)
	src := GrantSource{
		Server:        "alpha",
		TokenEndpoint: func(context.Context) (string, error) { return as.URL() + "/token", nil },
		Resource:      r.resource,
	}
	if o.configured {
		src.Client = r.client
	} else if err := r.store.SaveClient(context.Background(), r.key, r.client); err != nil {
		tb.Fatal(err)
	}
	r.src = src
	r.c.Sync(map[string]GrantSource{r.key: src})
	return r
}

// login mints a grant at the authorization server and stores it; expired
// makes the stored access token already expired.
func (r *rig) login(tb testing.TB, expired bool) *Token {
	tb.Helper()
	g := r.as.MintGrant(r.client.ClientID, r.resource, "read")
	t := &Token{AccessToken: g["access_token"].(string), RefreshToken: g["refresh_token"].(string), TokenType: "Bearer",
		Expiry: time.Now().Add(time.Hour), Scopes: []string{"read"}}
	if expired {
		t.Expiry = time.Now().Add(-time.Minute)
	}
	if _, err := r.c.SaveLogin(context.Background(), r.key, "alpha", t); err != nil {
		tb.Fatal(err)
	}
	saved, err := r.store.Token(context.Background(), r.key)
	if err != nil {
		tb.Fatal(err)
	}
	r.as.ResetCounters()
	return saved
}

func (r *rig) httpClient() *http.Client {
	return &http.Client{Transport: NewBearerTransport(nil, r.c, r.key)}
}

func (r *rig) call(hc *http.Client) (int, error) {
	resp, err := hc.Get(r.upstream.URL + "/mcp")
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
