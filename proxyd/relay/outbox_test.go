package relay

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// An Outbox delivers in order what it took, never makes Put wait for the
// client, and drops what comes past its bounds while the client does not
// take what waits.
func TestOutbox(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", OutboxBytes) + `"`)
	small := json.RawMessage(`{}`)
	tests := []struct {
		name        string
		puts        []json.RawMessage // while the client is stalled on the first
		wantDropped int
	}{
		{"within the bounds", repeat(small, 10), 0},
		{"past the count", repeat(small, OutboxMessages+5), 4}, // the first is being delivered
		{"past the bytes", []json.RawMessage{small, small, big, small}, 1},
		{"one of any size when empty", []json.RawMessage{small, big}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			stalled := make(chan struct{})
			var mu sync.Mutex
			var got []int
			o := NewOutbox(func(method string, _ json.RawMessage) {
				if len(got) == 0 {
					close(stalled)
					<-release
				}
				mu.Lock()
				got = append(got, len(got))
				mu.Unlock()
			})
			for i, p := range tt.puts {
				if !o.Put("m", p) {
					t.Fatalf("put %d refused before Close", i)
				}
				if i == 0 {
					<-stalled // the first is with the client, which waits
				}
			}
			close(release)
			if dropped := o.Close(); dropped != tt.wantDropped {
				t.Errorf("dropped %d, want %d", dropped, tt.wantDropped)
			}
			if want := len(tt.puts) - tt.wantDropped; len(got) != want {
				t.Errorf("delivered %d, want %d", len(got), want)
			}
			if o.Put("m", small) {
				t.Error("Put after Close taken")
			}
		})
	}
}

func repeat(p json.RawMessage, n int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = p
	}
	return out
}
