package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"

	"github.com/mcpx-dev/mcpx/internal/redact"
	"github.com/mcpx-dev/mcpx/proxyd/api"
)

// streamCall runs req as a streamed call: it shows the call's progress and
// log messages, answers its requests for input, and cancels it upstream on
// Ctrl-C. cancelled reports that the user asked to cancel.
// fileAnswer is --elicit @FILE's answer, read before the call.
func streamCall(c *cli.Context, cl *api.Client, req api.CallRequest, fileAnswer json.RawMessage) (res *api.CallResponse, cancelled bool, err error) {
	f, _ := format(c)
	show := &callDisplay{w: c.App.ErrWriter, bar: f == "table" && isTTY(c.App.ErrWriter), quiet: f != "table"}
	ans := &elicitAnswerer{policy: c.String("elicit"), file: fileAnswer, out: show, in: newLineSource(os.Stdin)}
	ans.interactive = ans.policy == "" && isTTY(os.Stdin) && isTTY(c.App.ErrWriter)
	req.Elicitation = true

	ctx, abort := context.WithCancel(c.Context)
	defer abort()
	var mu sync.Mutex
	requestID := ""
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	go func() {
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-sig:
			}
			mu.Lock()
			cancelled = true
			id := requestID
			mu.Unlock()
			if n > 0 || id == "" {
				abort()
				return
			}
			show.note("cancelling the call (Ctrl-C again to quit at once)")
			_ = cl.CancelCall(context.WithoutCancel(ctx), id)
		}
	}()

	// Each request for input is answered on a goroutine of its own, with
	// a context that ends when the server withdraws the request or the
	// call's stream ends: a prompt left unanswered then stops waiting.
	var answers sync.WaitGroup
	defer answers.Wait()
	asking := map[string]context.CancelFunc{}
	defer func() {
		mu.Lock()
		for _, stop := range asking {
			stop()
		}
		mu.Unlock()
	}()
	stream, err := cl.CallStream(ctx, req)
	if err != nil {
		return nil, false, err
	}
	defer stream.Close()
	for {
		ev, nerr := stream.Next()
		if nerr == io.EOF {
			break
		}
		if nerr != nil {
			err = nerr
			break
		}
		switch ev.Event {
		case api.EventStarted:
			mu.Lock()
			requestID = ev.RequestID
			mu.Unlock()
		case api.EventProgress:
			show.progress(ev.Progress)
		case api.EventLog:
			if c.String("log-level") != "off" {
				show.log(ev.Log)
			}
		case api.EventRefused:
			show.refused(ev.Refused)
		case api.EventInputCancelled:
			if ev.Input != nil && ev.Input.TimedOut {
				show.note("the call's time ran out before the answer")
			} else {
				show.note("the server withdrew its request for input")
			}
			if ev.Input != nil {
				mu.Lock()
				if stop := asking[ev.Input.ID]; stop != nil {
					stop()
				}
				mu.Unlock()
			}
		case api.EventInput:
			in := *ev.Input
			ictx, stop := context.WithCancel(ctx)
			mu.Lock()
			id := requestID
			asking[in.ID] = stop
			mu.Unlock()
			answers.Add(1)
			go func() {
				defer answers.Done()
				defer stop()
				answer := api.CallInput{RequestID: id, ID: in.ID}
				show.pause()
				result, err := ans.answer(ictx, in.Params)
				show.resume()
				if ictx.Err() != nil {
					return // withdrawn, or the call is over: nobody waits for it
				}
				if err != nil {
					show.note(err.Error())
					answer.Error = &api.InputError{Code: -32603, Message: err.Error()}
				} else {
					answer.Result = result
				}
				_ = cl.AnswerInput(ctx, answer)
			}()
		case api.EventResult:
			res = ev.Result
		}
	}
	show.done()
	mu.Lock()
	defer mu.Unlock()
	if err == nil && res == nil {
		if cancelled {
			return nil, true, exitErr(ExitInterrupted, errors.New("interrupted before proxyd answered"))
		}
		err = errors.New("proxyd ended the call's stream without a result")
	}
	return res, cancelled, err
}

func isTTY(w any) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// callDisplay shows a call's events on stderr: a progress bar redrawn in
// place on a terminal, plain lines otherwise, no progress at all with
// -o json or yaml; log messages and notes as lines.
type callDisplay struct {
	w     io.Writer
	bar   bool
	quiet bool

	mu     sync.Mutex
	drawn  bool // a bar is on the current line
	paused bool // a prompt owns the terminal
}

// Write lets prompts go through the display, which clears its bar first.
func (d *callDisplay) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
	return d.w.Write(p)
}

func (d *callDisplay) clear() {
	if d.drawn {
		fmt.Fprint(d.w, "\r\x1b[K")
		d.drawn = false
	}
}

func (d *callDisplay) progress(p *api.ProgressEvent) {
	if d.quiet || p == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused {
		return
	}
	if d.bar {
		d.clear()
		fmt.Fprint(d.w, progressBar(p, 30))
		d.drawn = true
		return
	}
	fmt.Fprintf(d.w, "progress: %s\n", progressText(p))
}

// progressText is "3/5 message" (or "3 message" without a total).
func progressText(p *api.ProgressEvent) string {
	s := trimFloat(p.Progress)
	if p.Total != nil {
		s += "/" + trimFloat(*p.Total)
	}
	if p.Message != "" {
		s += " " + redact.Control(p.Message)
	}
	return s
}

// progressBar is a bar of width cells with the progress text.
func progressBar(p *api.ProgressEvent, width int) string {
	if p.Total == nil || *p.Total <= 0 {
		return "[" + strings.Repeat("·", width) + "] " + progressText(p)
	}
	n := int(p.Progress / *p.Total * float64(width))
	n = max(0, min(n, width))
	return "[" + strings.Repeat("#", n) + strings.Repeat("·", width-n) + "] " + progressText(p)
}

func trimFloat(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".")
}

func (d *callDisplay) log(l *api.LogEvent) {
	if l == nil {
		return
	}
	var text string
	if err := json.Unmarshal(l.Data, &text); err != nil {
		text = string(l.Data)
	}
	from := "upstream"
	if l.Logger != "" {
		from += " " + l.Logger
	}
	d.note(fmt.Sprintf("[%s] %s: %s", redact.Control(l.Level), redact.Control(from), redact.Control(text)))
}

func (d *callDisplay) refused(r *api.RefusedEvent) {
	if r == nil {
		return
	}
	what := r.Method
	if r.Method == "sampling/createMessage" {
		what = "an LLM completion (sampling/createMessage)"
	}
	d.note(fmt.Sprintf("the server asked for %s; refused: %s", what, r.Reason))
}

// note writes a line, keeping the bar below it.
func (d *callDisplay) note(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
	fmt.Fprintln(d.w, s)
}

func (d *callDisplay) pause() {
	d.mu.Lock()
	d.paused = true
	d.clear()
	d.mu.Unlock()
}

func (d *callDisplay) resume() {
	d.mu.Lock()
	d.paused = false
	d.mu.Unlock()
}

func (d *callDisplay) done() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clear()
}
