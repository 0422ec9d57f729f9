package upstream

import (
	"errors"
	"testing"
)

// The run loop hears the loss of the connection it holds, whenever it was
// reported, and never an earlier connection's.
func TestLossesAreTheirConnections(t *testing.T) {
	errOld, errNew, errLater := errors.New("old"), errors.New("new"), errors.New("later")
	tests := []struct {
		name string
		// steps before the run loop looks at connection two: reports
		// made with the connection number, begin() starting the next.
		steps func(l *losses, one, two uint64)
		want  error
	}{
		{"reported before the loop waits", func(l *losses, one, two uint64) {
			l.report(two, errNew)
		}, errNew},
		{"an earlier connection's report is dropped", func(l *losses, one, two uint64) {
			l.report(one, errOld)
		}, nil},
		{"an earlier connection's wake does not hide the next report", func(l *losses, one, two uint64) {
			l.wake <- struct{}{} // one's report woke nobody before it was replaced
			l.report(two, errNew)
		}, errNew},
		{"the first report is kept", func(l *losses, one, two uint64) {
			l.report(two, errNew)
			l.report(two, errLater)
		}, errNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &losses{wake: make(chan struct{}, 1)}
			one := l.begin()
			l.report(one, errOld) // connection one's own loss
			if got := l.lost(one); got != errOld {
				t.Fatalf("connection one: lost %v, want %v", got, errOld)
			}
			<-l.wake
			two := l.begin()
			tt.steps(l, one, two)
			got := l.lost(two)
			if got != tt.want {
				t.Fatalf("connection two: lost %v, want %v", got, tt.want)
			}
			if got != nil {
				select {
				case <-l.wake:
				default:
					t.Fatal("a loss was recorded without waking the run loop")
				}
			}
		})
	}
}
