package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Resource subscriptions: proxyd holds one upstream subscription per URI
// for all its clients (counted), and the connection keeps them across
// reconnects and re-established sessions. A legacy upstream gets
// resources/subscribe and resources/unsubscribe; a modern upstream a
// subscriptions/listen stream whose filter names the URIs (and the list
// changes proxyd follows), reopened when the set changes.

// Subscribe adds a subscriber of uri, subscribing upstream for the first.
func (c *Conn) Subscribe(ctx context.Context, uri string) error {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs[uri] > 0 {
		c.subs[uri]++
		return nil
	}
	if c.Modern() {
		c.subs[uri] = 1
		c.listen()
		return nil
	}
	if err := c.subscribeLegacy(ctx, mcp.MethodResourcesSubscribe, uri); err != nil {
		return err
	}
	c.subs[uri] = 1
	return nil
}

// Unsubscribe removes a subscriber of uri, unsubscribing upstream after
// the last.
func (c *Conn) Unsubscribe(ctx context.Context, uri string) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs[uri] == 0 {
		return
	}
	if c.subs[uri]--; c.subs[uri] > 0 {
		return
	}
	delete(c.subs, uri)
	if c.Modern() {
		c.listen()
		return
	}
	if err := c.subscribeLegacy(ctx, mcp.MethodResourcesUnsubscribe, uri); err != nil {
		c.opts.logger().Debug("resources/unsubscribe", "server", c.name, "uri", uri, "err", err)
	}
}

func (c *Conn) subscribeLegacy(ctx context.Context, method mcp.MCPMethod, uri string) error {
	params, err := json.Marshal(map[string]string{"uri": uri})
	if err != nil {
		return err
	}
	return c.withSession(ctx, nil, func(ctx context.Context, cl *client.Client) error {
		c.mu.RLock()
		w := c.wire
		c.mu.RUnlock()
		_, err := rawRequest(ctx, cl, w, string(method), "", nil, params)
		return err
	})
}

// resubscribe restores the subscriptions on a new connection or session,
// and a modern upstream's listen stream.
func (c *Conn) resubscribe() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.Modern() {
		c.listen()
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, connectTimeout)
	defer cancel()
	for uri := range c.subs {
		if err := c.subscribeLegacy(ctx, mcp.MethodResourcesSubscribe, uri); err != nil {
			c.opts.logger().Warn("re-subscribing to a resource", "server", c.name, "uri", uri, "err", err)
		}
	}
}

// listen (re)opens a modern upstream's subscriptions/listen stream with
// the current filter; under subMu.
func (c *Conn) listen() {
	c.mu.RLock()
	cl, caps := c.cl, c.caps
	c.mu.RUnlock()
	if c.stopListen != nil {
		c.stopListen()
		c.stopListen = nil
	}
	if cl == nil {
		return
	}
	var f mcp.SubscriptionFilter
	if caps.Tools != nil && caps.Tools.ListChanged {
		f.ToolsListChanged = true
	}
	if caps.Prompts != nil && caps.Prompts.ListChanged {
		f.PromptsListChanged = true
	}
	if caps.Resources != nil {
		f.ResourcesListChanged = caps.Resources.ListChanged
		if caps.Resources.Subscribe {
			for uri := range c.subs {
				f.ResourceSubscriptions = append(f.ResourceSubscriptions, uri)
			}
			sort.Strings(f.ResourceSubscriptions)
		}
	}
	if f.IsEmpty() {
		return
	}
	c.listenGen++
	gen := c.listenGen
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		opened := time.Now()
		err := cl.Listen(ctx, f)
		if ctx.Err() != nil {
			return // closed by proxyd: a new filter, connection or stop
		}
		c.listenEnded(cl, gen, err, time.Since(opened))
	}()
	c.stopListen = func() {
		cancel()
		<-done
	}
}

// Bounds on the delay before a modern upstream's listen stream that ended
// is opened again; it doubles with each stream in a row that lasted less
// than listenSteady.
const (
	listenRetryMin = 250 * time.Millisecond
	listenRetryMax = 30 * time.Second
	listenSteady   = time.Minute
)

// listenEnded acts on a listen stream of connection cl that the server or
// the network ended: a refusal the server answered means it has none to
// give; a connection that cannot be made loses the connection (its
// reconnect opens the stream again); anything else (a load balancer's
// idle cut, a server restarted, the stream closed by its server) reads
// the lists again after a delay, since what changed meanwhile was not
// announced, and opens the stream again. The stream proxyd had was the
// only news of list changes and subscribed resources: without this they
// stopped for good. Nothing is done for a connection already replaced:
// its loss is known, and its stream is not opened again.
func (c *Conn) listenEnded(cl *client.Client, gen uint64, err error, lasted time.Duration) {
	var te *transport.Error
	if err != nil && !errors.As(err, &te) {
		c.opts.logger().Debug("subscriptions/listen not available", "server", c.name, "err", err)
		return
	}
	if !c.current(cl) {
		return
	}
	if connectionLost(err, c.cfg.EffectiveTransport()) {
		c.checkClient(cl, err)
		return
	}
	if lasted >= listenSteady {
		c.listenEnds.Store(0)
	}
	n := c.listenEnds.Add(1)
	delay := min(listenRetryMin<<min(n-1, 8), listenRetryMax)
	log := c.opts.logger().Debug // a cut now and then is routine
	if n > 3 {
		log = c.opts.logger().Warn // the stream keeps ending as soon as it opens
	}
	log("subscriptions/listen ended; opening it again", "server", c.name, "err", fmt.Sprint(err), "after", delay, "ended_in_a_row", n)
	time.AfterFunc(delay, func() {
		if !c.current(cl) {
			return
		}
		// A server gone by now loses the connection in the read, whose
		// reconnect opens the stream; one that failed the read otherwise
		// still gets the stream, which is the news of its next change.
		_ = c.refreshLists()
		c.subMu.Lock()
		defer c.subMu.Unlock()
		if c.listenGen == gen && c.current(cl) {
			c.listen()
		}
	})
}

// current reports whether cl is the connection's client now.
func (c *Conn) current(cl *client.Client) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cl == cl
}
