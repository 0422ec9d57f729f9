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
	// DPoPKey is the grant's proof-of-possession private key (see
	// dpop.go); empty for a bearer grant. It never leaves the store but
	// to sign proofs.
	DPoPKey string
	// Issuer is the authorization server that issued the grant.
	Issuer string
}

// Static reports whether the token is one 'mcpx auth set-token' stored:
// a bare access token, with no expiry, refresh token, issuer or key, which
// no sign-in leaves.
func (t *Token) Static() bool {
	return t.RefreshToken == "" && t.Expiry.IsZero() && t.Issuer == "" && t.DPoPKey == ""
}

// Binding is how the token is presented: "DPoP" when it is bound to the
// grant's key, "Bearer" otherwise.
func (t *Token) Binding() string {
	if t.DPoPKey != "" && strings.EqualFold(t.TokenType, "DPoP") {
		return "DPoP"
	}
	return "Bearer"
}

// Client is the OAuth client used for a server: configured (oauth.client_id)
// or dynamically registered.
type Client struct {
	ClientID     string
	ClientSecret string
	Registered   bool   // obtained by RFC 7591 registration
	RedirectURI  string // as registered
	// AuthMethod is the token endpoint auth method: none,
	// client_secret_basic, client_secret_post or private_key_jwt. Empty:
	// private_key_jwt with a key, none without a secret,
	// client_secret_basic with one.
	AuthMethod string
	// PrivateKey is the PEM key of private_key_jwt. For a configured
	// client it and ClientSecret may be ${env:...}/${file:...}
	// references, resolved at each token request (resolve).
	PrivateKey string
	// Issuer is the authorization server a registration was made at
	// (credentials are keyed by issuer); empty for a configured client.
	Issuer string
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
	db     *store.DB
	holder string // this store's name as a refresh lease holder
	now    func() time.Time
	mu     sync.Mutex // serialises this process's read-modify-writes
}

// NewStore wraps db.
func NewStore(db *store.DB) *Store { return &Store{db: db, holder: holderID(), now: time.Now} }

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
	err := q.QueryRowContext(ctx, `SELECT access_token, refresh_token, token_type, expiry, scopes, generation, updated, dpop_key, issuer
		FROM oauth_tokens WHERE server_key = ?`, key).
		Scan(&t.AccessToken, &t.RefreshToken, &t.TokenType, &expiry, &scopes, &t.Generation, &updated, &t.DPoPKey, &t.Issuer)
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
	if err := s.writeToken(ctx, tx, key, name, next); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit token update: %w", err)
	}
	return nil
}

// writeToken upserts key's token in tx.
func (s *Store) writeToken(ctx context.Context, tx *store.Tx, key, name string, next *Token) error {
	tt := next.TokenType
	if tt == "" {
		tt = "Bearer"
	}
	obtained := next.Obtained
	if obtained.IsZero() {
		obtained = s.now()
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO oauth_tokens
		(server_key, server_name, access_token, refresh_token, token_type, expiry, scopes, generation, updated, dpop_key, issuer)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET server_name = excluded.server_name,
		access_token = excluded.access_token, refresh_token = excluded.refresh_token,
		token_type = excluded.token_type, expiry = excluded.expiry, scopes = excluded.scopes,
		generation = excluded.generation, updated = excluded.updated,
		dpop_key = excluded.dpop_key, issuer = excluded.issuer`,
		key, name, next.AccessToken, next.RefreshToken, tt, toMillis(next.Expiry),
		strings.Join(next.Scopes, " "), next.Generation, toMillis(obtained), next.DPoPKey, next.Issuer)
	if err != nil {
		return fmt.Errorf("write token: %w", err)
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
	err := s.db.QueryRowContext(ctx, `SELECT client_id, client_secret, registered, redirect_uri, raw, issuer
		FROM oauth_clients WHERE server_key = ?`, key).Scan(&c.ClientID, &c.ClientSecret, &registered, &c.RedirectURI, &raw, &c.Issuer)
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
	_, err := s.db.ExecContext(ctx, `INSERT INTO oauth_clients (server_key, client_id, client_secret, registered, redirect_uri, raw, updated, issuer)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET client_id = excluded.client_id, client_secret = excluded.client_secret,
		registered = excluded.registered, redirect_uri = excluded.redirect_uri, raw = excluded.raw, updated = excluded.updated,
		issuer = excluded.issuer`,
		key, c.ClientID, c.ClientSecret, reg, c.RedirectURI, string(raw), toMillis(s.now()), c.Issuer)
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
	// Fingerprint is the grant (generation, refresh token, client) the
	// latch or cooldown belongs to; CoolUntil ends a transient failure's
	// backoff, the CoolCount-th in a row. Every process sharing the store
	// honours them.
	Fingerprint string
	CoolUntil   time.Time
	CoolCount   int
	// FlightFP is set while a token request for that grant is out; a
	// holder that finds it set, with no holder left, knows the outcome of
	// that request is unknown.
	FlightFP string
}

// State returns key's refresh state (zero when none).
func (s *Store) State(ctx context.Context, key string) (RefreshState, error) {
	return readState(ctx, s.db, key)
}

func readState(ctx context.Context, q querier, key string) (RefreshState, error) {
	var st RefreshState
	var last int64
	var outcome string
	var cool int64
	err := q.QueryRowContext(ctx, `SELECT last_refresh, last_outcome, last_class, latched, fingerprint, cool_until, cool_count, flight_fp
		FROM oauth_state WHERE server_key = ?`, key).
		Scan(&last, &outcome, &st.LastClass, &st.Latched, &st.Fingerprint, &cool, &st.CoolCount, &st.FlightFP)
	st.LastOutcome = Outcome(outcome)
	st.CoolUntil = fromMillis(cool)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read refresh state: %w", err)
	}
	st.LastRefresh = fromMillis(last)
	return st, nil
}

// SaveState stores key's refresh state (the in-flight marker aside, which
// only a grant hold sets and clears).
func (s *Store) SaveState(ctx context.Context, key string, st RefreshState) error {
	_, err := s.db.ExecContext(ctx, saveStateSQL,
		key, toMillis(st.LastRefresh), string(st.LastOutcome), st.LastClass, st.Latched, st.Fingerprint,
		toMillis(st.CoolUntil), st.CoolCount, toMillis(s.now()))
	if err != nil {
		return fmt.Errorf("save refresh state: %w", err)
	}
	return nil
}

const saveStateSQL = `INSERT INTO oauth_state (server_key, last_refresh, last_outcome, last_class, latched,
		fingerprint, cool_until, cool_count, updated)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET last_refresh = excluded.last_refresh, last_outcome = excluded.last_outcome,
		last_class = excluded.last_class, latched = excluded.latched, fingerprint = excluded.fingerprint,
		cool_until = excluded.cool_until, cool_count = excluded.cool_count, updated = excluded.updated`

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
