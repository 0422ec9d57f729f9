// Package oauth keeps upstream OAuth tokens fresh: the token store, the
// classification of refresh failures, and the coordinator that runs at
// most one refresh per grant and hands every caller the same outcome.
package oauth

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// ServerKey is the stable key of a server's credentials, derived from its
// name and URL so that renaming or re-pointing a server never reuses
// another server's tokens.
func ServerKey(name, url string) string {
	sum := sha256.Sum256([]byte(name + "\x00" + url))
	return hex.EncodeToString(sum[:16])
}

// Token is a stored grant. Generation counts sign-ins: it changes only
// when a login replaces the grant, never on refresh.
type Token struct {
	AccessToken  string
	RefreshToken string
	TokenType    string
	Expiry       time.Time // zero: no known expiry
	Scopes       []string
	Generation   int64
	Obtained     time.Time // when this access token was stored
}

// Client is the OAuth client used for a server: configured (oauth.client_id)
// or dynamically registered.
type Client struct {
	ClientID     string
	ClientSecret string
	Registered   bool   // obtained by RFC 7591 registration
	RedirectURI  string // as registered
	// AuthMethod is the token endpoint auth method: none,
	// client_secret_basic or client_secret_post. Empty: none without a
	// secret, client_secret_basic with one.
	AuthMethod string
}

// Errors of the store.
var (
	ErrNoToken  = errors.New("not signed in")
	ErrNoClient = errors.New("no OAuth client")
)

// Store keeps tokens, clients and refresh state in proxyd's state
// database (tables oauth_tokens, oauth_clients, oauth_state), SQLite or
// PostgreSQL. A read-modify-write runs in one transaction that locks what
// it reads (SQLite: the immediate transaction's write lock; PostgreSQL:
// SELECT ... FOR UPDATE), so two processes cannot interleave.
type Store struct {
	db  *store.DB
	now func() time.Time
	mu  sync.Mutex // serialises this process's read-modify-writes
}

// NewStore wraps db.
func NewStore(db *store.DB) *Store { return &Store{db: db, now: time.Now} }

func toMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func readToken(ctx context.Context, q querier, key string) (*Token, error) {
	var t Token
	var expiry, updated int64
	var scopes string
	err := q.QueryRowContext(ctx, `SELECT access_token, refresh_token, token_type, expiry, scopes, generation, updated
		FROM oauth_tokens WHERE server_key = ?`, key).
		Scan(&t.AccessToken, &t.RefreshToken, &t.TokenType, &expiry, &scopes, &t.Generation, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoToken
	}
	if err != nil {
		return nil, fmt.Errorf("read token: %w", err)
	}
	t.Expiry = fromMillis(expiry)
	t.Obtained = fromMillis(updated)
	t.Scopes = strings.Fields(scopes)
	return &t, nil
}

// Token returns the stored token of key, or ErrNoToken.
func (s *Store) Token(ctx context.Context, key string) (*Token, error) {
	return readToken(ctx, s.db, key)
}

// UpdateToken runs fn on the current token (nil when none) and stores what
// it returns, in one transaction. fn returning (nil, nil) changes nothing;
// an error from fn rolls back and is returned as is.
func (s *Store) UpdateToken(ctx context.Context, key, name string, fn func(cur *Token) (*Token, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin token update: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tx.Lock(ctx, store.LockRow, key); err != nil {
		return err
	}
	cur, err := readToken(ctx, tx, key)
	if err != nil && !errors.Is(err, ErrNoToken) {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	if next == nil {
		return nil
	}
	tt := next.TokenType
	if tt == "" {
		tt = "Bearer"
	}
	obtained := next.Obtained
	if obtained.IsZero() {
		obtained = s.now()
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO oauth_tokens
		(server_key, server_name, access_token, refresh_token, token_type, expiry, scopes, generation, updated)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET server_name = excluded.server_name,
		access_token = excluded.access_token, refresh_token = excluded.refresh_token,
		token_type = excluded.token_type, expiry = excluded.expiry, scopes = excluded.scopes,
		generation = excluded.generation, updated = excluded.updated`,
		key, name, next.AccessToken, next.RefreshToken, tt, toMillis(next.Expiry),
		strings.Join(next.Scopes, " "), next.Generation, toMillis(obtained))
	if err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit token update: %w", err)
	}
	return nil
}

// SaveLogin stores the token of a new sign-in and returns its generation,
// one more than the grant it replaces.
func (s *Store) SaveLogin(ctx context.Context, key, name string, t *Token) (int64, error) {
	var gen int64
	err := s.UpdateToken(ctx, key, name, func(cur *Token) (*Token, error) {
		next := *t
		next.Generation = 1
		if cur != nil {
			next.Generation = cur.Generation + 1
		}
		next.Obtained = time.Time{}
		gen = next.Generation
		return &next, nil
	})
	return gen, err
}

// DeleteToken removes key's token (logout). Deleting nothing is not an
// error.
func (s *Store) DeleteToken(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM oauth_tokens WHERE server_key = ?`, key); err != nil {
		return fmt.Errorf("delete token: %w", err)
	}
	return nil
}

type clientExtra struct {
	AuthMethod string `json:"auth_method,omitempty"`
}

// Client returns key's client, or ErrNoClient.
func (s *Store) Client(ctx context.Context, key string) (*Client, error) {
	var c Client
	var registered int
	var raw string
	err := s.db.QueryRowContext(ctx, `SELECT client_id, client_secret, registered, redirect_uri, raw
		FROM oauth_clients WHERE server_key = ?`, key).Scan(&c.ClientID, &c.ClientSecret, &registered, &c.RedirectURI, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoClient
	}
	if err != nil {
		return nil, fmt.Errorf("read client: %w", err)
	}
	c.Registered = registered != 0
	var extra clientExtra
	if raw != "" && json.Unmarshal([]byte(raw), &extra) == nil {
		c.AuthMethod = extra.AuthMethod
	}
	return &c, nil
}

// SaveClient stores key's client, replacing any other.
func (s *Store) SaveClient(ctx context.Context, key string, c *Client) error {
	if c.ClientID == "" {
		return errors.New("save client: empty client_id")
	}
	raw, _ := json.Marshal(clientExtra{AuthMethod: c.AuthMethod})
	s.mu.Lock()
	defer s.mu.Unlock()
	reg := 0
	if c.Registered {
		reg = 1
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO oauth_clients (server_key, client_id, client_secret, registered, redirect_uri, raw, updated)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET client_id = excluded.client_id, client_secret = excluded.client_secret,
		registered = excluded.registered, redirect_uri = excluded.redirect_uri, raw = excluded.raw, updated = excluded.updated`,
		key, c.ClientID, c.ClientSecret, reg, c.RedirectURI, string(raw), toMillis(s.now()))
	if err != nil {
		return fmt.Errorf("save client: %w", err)
	}
	return nil
}

// ClearClientIf deletes key's client only while it is still clientID and
// the stored grant still uses refreshToken: a registration or grant saved
// by a newer sign-in is never cleared.
func (s *Store) ClearClientIf(ctx context.Context, key, clientID, refreshToken string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin client clear: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tx.Lock(ctx, store.LockRow, key); err != nil {
		return false, err
	}
	var cur string
	err = tx.QueryRowContext(ctx, `SELECT client_id FROM oauth_clients WHERE server_key = ?`, key).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && cur != clientID) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read client: %w", err)
	}
	tok, err := readToken(ctx, tx, key)
	switch {
	case errors.Is(err, ErrNoToken):
		if refreshToken != "" {
			return false, nil
		}
	case err != nil:
		return false, err
	case tok.RefreshToken != refreshToken:
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_clients WHERE server_key = ?`, key); err != nil {
		return false, fmt.Errorf("clear client: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit client clear: %w", err)
	}
	return true, nil
}

// RefreshState is the persisted outcome of the last refresh of a server.
type RefreshState struct {
	LastRefresh time.Time
	LastOutcome Outcome
	LastClass   string // transient|terminal|""
	Latched     string // terminal message, empty when not latched
}

// State returns key's refresh state (zero when none).
func (s *Store) State(ctx context.Context, key string) (RefreshState, error) {
	var st RefreshState
	var last int64
	var outcome string
	err := s.db.QueryRowContext(ctx, `SELECT last_refresh, last_outcome, last_class, latched FROM oauth_state WHERE server_key = ?`, key).
		Scan(&last, &outcome, &st.LastClass, &st.Latched)
	st.LastOutcome = Outcome(outcome)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read refresh state: %w", err)
	}
	st.LastRefresh = fromMillis(last)
	return st, nil
}

// SaveState stores key's refresh state.
func (s *Store) SaveState(ctx context.Context, key string, st RefreshState) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO oauth_state (server_key, last_refresh, last_outcome, last_class, latched, updated)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET last_refresh = excluded.last_refresh, last_outcome = excluded.last_outcome,
		last_class = excluded.last_class, latched = excluded.latched, updated = excluded.updated`,
		key, toMillis(st.LastRefresh), string(st.LastOutcome), st.LastClass, st.Latched, toMillis(s.now()))
	if err != nil {
		return fmt.Errorf("save refresh state: %w", err)
	}
	return nil
}

// Generations returns the generation of every stored grant by server key:
// a cheap poll that shows sign-ins and sign-outs made by other processes
// sharing the database.
func (s *Store) Generations(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT server_key, generation FROM oauth_tokens`)
	if err != nil {
		return nil, fmt.Errorf("read grant generations: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var g int64
		if err := rows.Scan(&k, &g); err != nil {
			return nil, fmt.Errorf("read grant generations: %w", err)
		}
		out[k] = g
	}
	return out, rows.Err()
}
