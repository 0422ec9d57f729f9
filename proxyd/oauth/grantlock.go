package oauth

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// GrantLock serialises the refresh of one grant across every process that
// shares the state database. The flight takes it before it re-reads the
// stored token, so a token another process already rotated is used with
// no network call.
type GrantLock interface {
	Hold(ctx context.Context, key string) (GrantHold, error)
}

// GrantHold is the refresh of one grant, held.
type GrantHold interface {
	// Token re-reads the stored token.
	Token(ctx context.Context) (*Token, error)
	// Shared is the refresh state every process records: the latch or
	// cooldown of a grant fingerprint, and the in-flight marker.
	Shared(ctx context.Context) (RefreshState, error)
	// MarkInFlight records, committed at once, that a token request for
	// grant fp is leaving; it is cleared when its answer is known.
	MarkInFlight(ctx context.Context, fp string) error
	// ClearInFlight records that the request's answer (an error) came back.
	ClearInFlight(ctx context.Context) error
	// Store replaces cur with next unless a sign-in replaced the grant
	// meanwhile (superseded), records the refresh state rs, clears the
	// marker, and releases the hold, all in one transaction.
	Store(ctx context.Context, name string, cur, next *Token, rs RefreshState) (superseded bool, err error)
	// Release ends the hold without storing; after Store it does nothing.
	Release()
}

// leaseTTL bounds an SQLite refresh lease whose holder cannot be checked
// (another host); on one host a dead holder's lease is taken at once.
const leaseTTL = time.Minute

// leasePoll is how often a process waiting for an SQLite lease looks
// again; PostgreSQL's advisory lock wakes waiters itself.
const leasePoll = 5 * time.Millisecond

var hostName, _ = os.Hostname()

// holderID names this Store as a lease holder: host, pid and a nonce (two
// stores in one process are two holders).
func holderID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", hostName, os.Getpid(), hex.EncodeToString(b))
}

// Hold implements GrantLock. On PostgreSQL it takes a transaction-level
// advisory lock on the grant in a transaction that stays open until the
// refreshed token is stored in it (or the holder dies: the server then
// ends the transaction and the next waiter proceeds at once). On SQLite
// it takes a lease row in an immediate transaction, with an expiry.
func (s *Store) Hold(ctx context.Context, key string) (GrantHold, error) {
	if s.db.Engine() == store.EnginePostgres {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("begin refresh hold: %w", err)
		}
		if err := tx.Lock(ctx, store.LockGrant, key); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("wait for the refresh lock: %w", err)
		}
		return &hold{s: s, key: key, tx: tx}, nil
	}
	tick := time.NewTicker(leasePoll)
	defer tick.Stop()
	for {
		ok, err := s.takeLease(ctx, key)
		if err != nil {
			return nil, err
		}
		if ok {
			return &hold{s: s, key: key}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the refresh lease: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// takeLease takes key's lease when it is free, expired, or held by a
// process of this host that no longer runs.
func (s *Store) takeLease(ctx context.Context, key string) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin refresh lease: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	now := s.now()
	var holder string
	var expires int64
	err = tx.QueryRowContext(ctx, `SELECT holder, expires FROM oauth_leases WHERE server_key = ?`, key).Scan(&holder, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, fmt.Errorf("read refresh lease: %w", err)
	case holder == s.holder:
	case now.UnixMilli() < expires && holderAlive(holder):
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO oauth_leases (server_key, holder, expires) VALUES (?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET holder = excluded.holder, expires = excluded.expires`,
		key, s.holder, now.Add(leaseTTL).UnixMilli()); err != nil {
		return false, fmt.Errorf("take refresh lease: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("take refresh lease: %w", err)
	}
	return true, nil
}

// holderAlive is false only for a holder of this host whose process is
// gone; others are trusted until their lease expires.
func holderAlive(holder string) bool {
	parts := strings.Split(holder, ":")
	if len(parts) < 3 || strings.Join(parts[:len(parts)-2], ":") != hostName {
		return true
	}
	pid, err := strconv.Atoi(parts[len(parts)-2])
	if err != nil || pid == os.Getpid() {
		return true
	}
	return store.ProcessAlive(pid)
}

type hold struct {
	s    *Store
	key  string
	tx   *store.Tx // PostgreSQL: the transaction holding the lock
	done bool
}

func (h *hold) q() querier {
	if h.tx != nil {
		return h.tx
	}
	return h.s.db
}

func (h *hold) Token(ctx context.Context) (*Token, error) { return readToken(ctx, h.q(), h.key) }

func (h *hold) Shared(ctx context.Context) (RefreshState, error) { return readState(ctx, h.q(), h.key) }

// MarkInFlight commits on its own connection: it must be visible to the
// next holder even if this one dies with its transaction open.
func (h *hold) MarkInFlight(ctx context.Context, fp string) error {
	_, err := h.s.db.ExecContext(ctx, `INSERT INTO oauth_state (server_key, flight_fp, flight_holder, flight_started, updated)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET flight_fp = excluded.flight_fp, flight_holder = excluded.flight_holder,
		flight_started = excluded.flight_started`,
		h.key, fp, h.s.holder, toMillis(h.s.now()), toMillis(h.s.now()))
	if err != nil {
		return fmt.Errorf("record the refresh in flight: %w", err)
	}
	return nil
}

func (h *hold) ClearInFlight(ctx context.Context) error {
	if _, err := h.s.db.ExecContext(ctx, clearFlightSQL, h.key); err != nil {
		return fmt.Errorf("clear the refresh in flight: %w", err)
	}
	return nil
}

const clearFlightSQL = `UPDATE oauth_state SET flight_fp = '', flight_holder = '', flight_started = 0 WHERE server_key = ?`

// storedStateSQL is saveStateSQL that also clears the in-flight marker.
const storedStateSQL = `INSERT INTO oauth_state (server_key, last_refresh, last_outcome, last_class, latched,
		fingerprint, cool_until, cool_count, updated)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (server_key) DO UPDATE SET last_refresh = excluded.last_refresh, last_outcome = excluded.last_outcome,
		last_class = excluded.last_class, latched = excluded.latched, fingerprint = excluded.fingerprint,
		cool_until = excluded.cool_until, cool_count = excluded.cool_count, updated = excluded.updated,
		flight_fp = '', flight_holder = '', flight_started = 0`

func (h *hold) Store(ctx context.Context, name string, cur, next *Token, rs RefreshState) (bool, error) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	tx := h.tx
	if tx == nil {
		var err error
		if tx, err = h.s.db.BeginTx(ctx, nil); err != nil {
			return false, fmt.Errorf("begin token update: %w", err)
		}
	}
	defer func() { _ = tx.Rollback() }()
	h.done = true
	// Compare and set: a sign-in that replaced the grant meanwhile changed
	// its generation or refresh token, and then nothing is written. A few
	// statements only, since every waiter on the grant waits for this.
	tt := next.TokenType
	if tt == "" {
		tt = "Bearer"
	}
	// The same grant as sameGrant decides: generation and refresh token,
	// and for a grant without one (a machine grant) the access token.
	res, err := tx.ExecContext(ctx, `UPDATE oauth_tokens SET server_name = ?, access_token = ?, refresh_token = ?,
		token_type = ?, expiry = ?, scopes = ?, updated = ?, dpop_key = ?, issuer = ?
		WHERE server_key = ? AND generation = ? AND refresh_token = ? AND (refresh_token <> '' OR access_token = ?)`,
		name, next.AccessToken, next.RefreshToken, tt, toMillis(next.Expiry), strings.Join(next.Scopes, " "),
		toMillis(next.Obtained), next.DPoPKey, next.Issuer, h.key, cur.Generation, cur.RefreshToken, cur.AccessToken)
	if err != nil {
		return false, fmt.Errorf("write token: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("write token: %w", err)
	}
	superseded := n == 0
	if superseded {
		_, err = tx.ExecContext(ctx, clearFlightSQL, h.key)
	} else {
		_, err = tx.ExecContext(ctx, storedStateSQL, h.key, toMillis(rs.LastRefresh), string(rs.LastOutcome), rs.LastClass,
			rs.Latched, rs.Fingerprint, toMillis(rs.CoolUntil), rs.CoolCount, toMillis(h.s.now()))
	}
	if err != nil {
		return false, fmt.Errorf("save refresh state: %w", err)
	}
	if h.tx == nil {
		if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_leases WHERE server_key = ? AND holder = ?`, h.key, h.s.holder); err != nil {
			return false, fmt.Errorf("release refresh lease: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit refreshed token: %w", err)
	}
	return superseded, nil
}

func (h *hold) Release() {
	if h.done {
		return
	}
	h.done = true
	if h.tx != nil {
		_ = h.tx.Rollback()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = h.s.db.ExecContext(ctx, `DELETE FROM oauth_leases WHERE server_key = ? AND holder = ?`, h.key, h.s.holder)
}

// markOnConnect records the refresh in flight when the token request has
// its connection: the last moment before it leaves. A holder that dies
// earlier leaves no marker, so the next one simply sends the same refresh
// token. When the marker cannot be written the request is cancelled.
// done reports the marker's error once the request is over.
func markOnConnect(ctx context.Context, mark func() error) (_ context.Context, done func() error) {
	ctx, cancel := context.WithCancelCause(ctx)
	var once sync.Once
	var merr error
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
		once.Do(func() {
			if merr = mark(); merr != nil {
				cancel(merr)
			}
		})
	}}
	return httptrace.WithClientTrace(ctx, trace), func() error {
		cancel(nil)
		once.Do(func() {}) // no marker after this point
		return merr
	}
}

// shared applies what other processes recorded for this grant under the
// hold: an interrupted refresh (a marker no holder cleared), a latch, or a
// cooldown.
func (c *Coordinator) shared(ctx context.Context, h GrantHold, key string, st *keyState, src GrantSource, fp string, now time.Time) *RefreshError {
	sh, err := h.Shared(ctx)
	if err != nil {
		c.log.Warn("oauth: read shared refresh state", "server", src.Server, "error", redact.Text(err.Error()))
		return nil
	}
	switch {
	case sh.FlightFP != "" && sh.FlightFP == fp:
		// The last token request for this very grant left and its answer
		// was never stored: the authorization server may have rotated the
		// refresh token, and sending the old one again would make a
		// reuse-detecting server revoke the grant.
		e := &RefreshError{Class: OutcomeInvalidGrant, Terminal: true,
			Msg: fmt.Sprintf("a refresh was interrupted: the process refreshing %s stopped after its token request left and before the answer was stored, so the grant's current refresh token is unknown; sign in again (mcpx login %s)", src.Server, src.Server)}
		if err := h.ClearInFlight(ctx); err != nil {
			c.log.Warn("oauth: clear the refresh in flight", "server", src.Server, "error", redact.Text(err.Error()))
		}
		c.fail(ctx, key, st, fp, e)
		return e
	case sh.Fingerprint == fp && sh.Latched != "":
		e := &RefreshError{Class: sh.LastOutcome, Terminal: true, Msg: sh.Latched}
		c.mu.Lock()
		st.latch = &latch{fp: fp, err: e}
		c.mu.Unlock()
		return e
	case sh.Fingerprint == fp && now.Before(sh.CoolUntil):
		e := &RefreshError{Class: sh.LastOutcome,
			Msg: fmt.Sprintf("refreshing %s failed (%s); the next attempt is after %s", src.Server, sh.LastOutcome, sh.CoolUntil.Format(time.RFC3339))}
		c.mu.Lock()
		st.cool = &cooldown{fp: fp, until: sh.CoolUntil, count: sh.CoolCount, err: e}
		c.mu.Unlock()
		return e
	}
	return nil
}
