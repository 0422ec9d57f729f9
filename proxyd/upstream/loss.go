package upstream

import "sync"

// losses is what the run loop hears of its connection's loss. Each
// connection attempt has a number, and a loss is reported with the number
// of the connection that saw it: a report of an earlier connection (two
// requests that failed together, one in flight as the connection was
// lost) is not taken for the next one's, and a report made by a new
// connection before the run loop waits on it (its listen stream refused
// the instant it was ready) is not lost. The first report of a connection
// is kept; wake only says there is something to read.
type losses struct {
	mu   sync.Mutex
	conn uint64 // the connection being made or held
	err  error  // its loss, nil while it lives
	wake chan struct{}
}

// begin numbers a new connection attempt.
func (l *losses) begin() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conn++
	l.err = nil
	return l.conn
}

// report records that connection conn was lost; a report of another
// connection than the current one is dropped.
func (l *losses) report(conn uint64, err error) {
	l.mu.Lock()
	if conn != l.conn || l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // already woken: the reader finds this report
	}
}

// lost is connection conn's loss, nil while it lives.
func (l *losses) lost(conn uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if conn != l.conn {
		return nil
	}
	return l.err
}
