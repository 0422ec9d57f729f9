package activity

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// With durability sync, Add returns once the record is committed: a crash
// right after a call loses nothing. With batch (the default) a record
// waits for its batch, up to FlushInterval.
func TestDurability(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng string) {
		for _, c := range []struct {
			durability string
			committed  bool
		}{{DurabilitySync, true}, {DurabilityBatch, false}} {
			t.Run(c.durability, func(t *testing.T) {
				s := newStore(t, eng, Options{Durability: c.durability, FlushInterval: time.Hour})
				var wg sync.WaitGroup
				for i := range 20 { // concurrent calls share commits
					wg.Add(1)
					go func() {
						defer wg.Done()
						s.Add(Record{Time: t0, Server: "s", Tool: fmt.Sprint("t", i)})
					}()
				}
				wg.Wait()
				// No Flush: what is committed now is what a SIGKILL keeps.
				got, err := s.List(context.Background(), Filter{})
				if err != nil {
					t.Fatal(err)
				}
				if c.committed && len(got) != 20 {
					t.Fatalf("%d of 20 records committed when Add returned", len(got))
				}
				if !c.committed && len(got) != 0 {
					t.Fatalf("%d records committed before their batch was due", len(got))
				}
			})
		}
	})
}
