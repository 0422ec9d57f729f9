package oauth

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestServerKey(t *testing.T) {
	a := ServerKey("alpha", "https://a.example/mcp")
	if a != ServerKey("alpha", "https://a.example/mcp") {
		t.Fatal("not stable")
	}
	for _, other := range []string{ServerKey("alpha", "https://b.example/mcp"), ServerKey("beta", "https://a.example/mcp"), ServerKey("alph", "ahttps://a.example/mcp")} {
		if other == a {
			t.Fatal("collision")
		}
	}
}

func TestStoreTokenRoundTrip(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := NewStore(openDB(t, eng))
		ctx := context.Background()
		if _, err := s.Token(ctx, "k"); !errors.Is(err, ErrNoToken) {
			t.Fatalf("empty store: %v", err)
		}
		exp := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
		gen, err := s.SaveLogin(ctx, "k", "alpha", &Token{AccessToken: "a", RefreshToken: "r", Expiry: exp, Scopes: []string{"x", "y"}})
		if err != nil || gen != 1 {
			t.Fatalf("gen %d err %v", gen, err)
		}
		got, err := s.Token(ctx, "k")
		if err != nil || got.AccessToken != "a" || got.RefreshToken != "r" || !got.Expiry.Equal(exp) || !slices.Equal(got.Scopes, []string{"x", "y"}) || got.TokenType != "Bearer" || got.Obtained.IsZero() {
			t.Fatalf("got %+v %v", got, err)
		}
		if gen, _ := s.SaveLogin(ctx, "k", "alpha", &Token{AccessToken: "b"}); gen != 2 {
			t.Fatalf("second login generation %d", gen)
		}
		if err := s.DeleteToken(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Token(ctx, "k"); !errors.Is(err, ErrNoToken) {
			t.Fatal("token survived delete")
		}
	})
}

func TestUpdateTokenIsAtomic(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := NewStore(openDB(t, eng))
		ctx := context.Background()
		if _, err := s.SaveLogin(ctx, "k", "alpha", &Token{AccessToken: "0"}); err != nil {
			t.Fatal(err)
		}
		const n = 40
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				err := s.UpdateToken(ctx, "k", "alpha", func(cur *Token) (*Token, error) {
					v, _ := strconv.Atoi(cur.AccessToken)
					next := *cur
					next.AccessToken = strconv.Itoa(v + 1)
					return &next, nil
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, _ := s.Token(ctx, "k")
		if got.AccessToken != strconv.Itoa(n) {
			t.Fatalf("lost updates: %s of %d", got.AccessToken, n)
		}
		// An error from fn rolls back; nil means no change.
		boom := errors.New("boom")
		if err := s.UpdateToken(ctx, "k", "alpha", func(*Token) (*Token, error) { return nil, boom }); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		if err := s.UpdateToken(ctx, "k", "alpha", func(*Token) (*Token, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		if got2, _ := s.Token(ctx, "k"); got2.AccessToken != got.AccessToken {
			t.Fatal("no-op update changed the token")
		}
	})
}

func TestClientsAndClearClientIf(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		ctx := context.Background()
		tests := []struct {
			name        string
			clientID    string
			refresh     string
			storedRT    string // "" and noToken false: token with empty refresh token
			noToken     bool
			wantCleared bool
		}{
			{"matching client and grant", "c1", "rt1", "rt1", false, true},
			{"client replaced by a new registration", "c0", "rt1", "rt1", false, false},
			{"grant replaced by a new login", "c1", "rt0", "rt1", false, false},
			{"no token, no refresh token used", "c1", "", "", true, true},
			{"no token, refresh token used", "c1", "rt1", "", true, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := NewStore(openDB(t, eng))
				if _, err := s.Client(ctx, "k"); !errors.Is(err, ErrNoClient) {
					t.Fatalf("empty: %v", err)
				}
				in := &Client{ClientID: "c1", ClientSecret: "sec", Registered: true, RedirectURI: "http://127.0.0.1:7/callback", AuthMethod: "client_secret_post"}
				if err := s.SaveClient(ctx, "k", in); err != nil {
					t.Fatal(err)
				}
				got, err := s.Client(ctx, "k")
				if err != nil || *got != *in {
					t.Fatalf("client = %+v, %v", got, err)
				}
				if !tt.noToken {
					if _, err := s.SaveLogin(ctx, "k", "alpha", &Token{AccessToken: "a", RefreshToken: tt.storedRT}); err != nil {
						t.Fatal(err)
					}
				}
				cleared, err := s.ClearClientIf(ctx, "k", tt.clientID, tt.refresh)
				if err != nil || cleared != tt.wantCleared {
					t.Fatalf("cleared = %v, %v", cleared, err)
				}
				_, err = s.Client(ctx, "k")
				if errors.Is(err, ErrNoClient) != tt.wantCleared {
					t.Fatalf("client present = %v", err == nil)
				}
			})
		}
		s := NewStore(openDB(t, eng))
		if err := s.SaveClient(ctx, "k", &Client{}); err == nil {
			t.Fatal("saved a client without client_id")
		}
	})
}

func TestRefreshState(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		s := NewStore(openDB(t, eng))
		ctx := context.Background()
		if st, err := s.State(ctx, "k"); err != nil || st != (RefreshState{}) {
			t.Fatalf("empty = %+v %v", st, err)
		}
		in := RefreshState{LastRefresh: time.UnixMilli(1_700_000_000_000), LastOutcome: OutcomeInvalidGrant, LastClass: "terminal", Latched: "sign in again"}
		if err := s.SaveState(ctx, "k", in); err != nil {
			t.Fatal(err)
		}
		if got, err := s.State(ctx, "k"); err != nil || !got.LastRefresh.Equal(in.LastRefresh) || got.Latched != in.Latched || got.LastOutcome != in.LastOutcome {
			t.Fatalf("got %+v %v", got, err)
		}
	})
}
