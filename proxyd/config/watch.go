package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchDebounce lets an editor's burst of events (truncate, write, rename)
// settle into one reload; watchSettle is how long the content must then
// stay the same before it is applied, so that a file written in place a
// piece at a time is not applied half-written because a prefix parses.
// (A writer pausing longer than that between pieces should write a new
// file and rename it over the old one, as mcpx does.)
const (
	watchDebounce = 100 * time.Millisecond
	watchSettle   = 500 * time.Millisecond
)

// Watch calls onChange with the reloaded configuration (or the error that
// loading it gave) each time the file at path changes content and then
// stays unchanged for watchSettle, until ctx
// ends; done is closed once the watcher has stopped. It watches the
// directory, not the file, because atomic writes (AddServer's and most
// editors') replace the file with a new one. The directory is created
// (0700) when missing. Callbacks run one at a time on the watcher's
// goroutine.
func Watch(ctx context.Context, path string, onChange func(*Config, error)) (done <-chan struct{}, err error) {
	target, err := resolvePath(path)
	if err != nil {
		return nil, err
	}
	dirs := []string{filepath.Dir(path)}
	if d := filepath.Dir(target); d != dirs[0] {
		dirs = append(dirs, d)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			w.Close()
			return nil, fmt.Errorf("watch config: %w", err)
		}
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, fmt.Errorf("watch config directory %s: %w", d, err)
		}
	}
	names := map[string]bool{filepath.Clean(path): true, filepath.Clean(target): true}
	last := readOrNil(path)
	var seen []byte // content at the previous check, to be confirmed
	checked := false
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer w.Close()
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if names[filepath.Clean(ev.Name)] {
					timer.Reset(watchDebounce)
					checked = false
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				onChange(nil, fmt.Errorf("watch config: %w", err))
			case <-timer.C:
				data := readOrNil(path)
				if !checked || !bytes.Equal(data, seen) {
					seen, checked = data, true
					timer.Reset(watchSettle) // confirm it stays this way
					continue
				}
				checked = false
				if bytes.Equal(data, last) {
					continue // touched, or rewritten with the same content
				}
				last = data
				if data == nil {
					onChange(Load(path)) // removed: an empty configuration
					continue
				}
				onChange(Parse(path, data))
			}
		}
	}()
	return ch, nil
}

// readOrNil returns the file's content; a missing or unreadable file reads
// as nil, so that its disappearance counts as a change.
func readOrNil(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return []byte{}
	}
	return b
}
