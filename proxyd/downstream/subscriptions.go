package downstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpx-dev/mcpx/internal/procs"
	"github.com/mcpx-dev/mcpx/proxyd/relay"
)

// Subscriptions. A legacy client subscribes with resources/subscribe and
// gets notifications/resources/updated on its session; a modern client
// opens a subscriptions/listen stream naming the URIs and list changes it
// wants, and gets them tagged with the stream's id. Either way proxyd
// holds one upstream subscription per URI (see Subscriber) and fans the
// upstream's updates out to the clients subscribed.

// Subscriber is implemented by backends that subscribe upstream on the
// clients' behalf.
type Subscriber interface {
	Subscribe(ctx context.Context, server, uri string) error
	Unsubscribe(server, uri string)
}

// Each subscription is a URI the client chose, held for as long as its
// session or stream lasts: they are bounded in length, per client (a
// legacy session or a listen stream) and in all.
const (
	maxSubscriptionURI       = 4096
	maxClientSubscriptions   = 256
	maxSubscriptionsInAll    = 4096
	subscriptionBoundsAdvice = "unsubscribe from resources no longer watched"
)

// subscriptionRefused says why a client may not subscribe to uri when it
// holds held subscriptions already ("" when it may).
func subscriptionRefused(uri string, held int) string {
	switch {
	case len(uri) > maxSubscriptionURI:
		return fmt.Sprintf("the URI is %d bytes long, over the %d proxyd subscribes to", len(uri), maxSubscriptionURI)
	case held >= maxClientSubscriptions:
		return fmt.Sprintf("this client holds %d subscriptions, the most proxyd keeps for one; %s", maxClientSubscriptions, subscriptionBoundsAdvice)
	}
	return ""
}

// holdSubscription counts one more subscription among all the clients'
// (false at maxSubscriptionsInAll); dropSubscriptions counts n fewer.
func (s *Server) holdSubscription() bool {
	if s.subscriptions.Add(1) > maxSubscriptionsInAll {
		s.subscriptions.Add(-1)
		return false
	}
	return true
}

func (s *Server) dropSubscriptions(n int) { s.subscriptions.Add(-int64(n)) }

// listener is one modern client's subscriptions/listen stream.
type listener struct {
	id     json.RawMessage // the listen request's id: the subscription id
	filter mcp.SubscriptionFilter
	uris   map[string]string // URI → the server it is held by
	peer   *httpPeer
	// out writes the stream's notifications: an upstream's reader that
	// passes one on does not wait for this client (see relay.Outbox).
	out *relay.Outbox
}

// listeners are the open listen streams.
type listeners struct {
	mu  sync.Mutex
	all map[*listener]struct{}
	// done ends every stream (shutdown).
	done chan struct{}
}

func (l *listeners) add(x *listener) {
	l.mu.Lock()
	if l.all == nil {
		l.all = map[*listener]struct{}{}
	}
	l.all[x] = struct{}{}
	l.mu.Unlock()
}

func (l *listeners) remove(x *listener) {
	l.mu.Lock()
	delete(l.all, x)
	l.mu.Unlock()
}

func (l *listeners) each(f func(*listener)) {
	l.mu.Lock()
	all := make([]*listener, 0, len(l.all))
	for x := range l.all {
		all = append(all, x)
	}
	l.mu.Unlock()
	for _, x := range all {
		f(x)
	}
}

// send writes a notification on the stream, tagged with its id.
func (x *listener) send(method string, params json.RawMessage) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	meta, _ := relay.Member(params, "_meta")
	if len(meta) == 0 {
		meta = []byte("{}")
	}
	meta = relay.WithMember(meta, mcp.MetaKeySubscriptionID, x.id)
	x.out.Put(method, relay.WithMember(params, "_meta", meta))
}

// UnreadyLister is implemented by backends that can name the servers not
// ready now: their tools, prompts and resources are withdrawn, so a
// refusal for something no server lists may be theirs.
type UnreadyLister interface {
	UnreadyServers() []string
}

// subscribe answers a legacy client's resources/subscribe or unsubscribe.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request, sess *session, msg relay.Message) bool {
	sub, ok := s.backend.(Subscriber)
	if !ok {
		return false
	}
	uri := relay.StringMember(msg.Params, "uri")
	t := s.table.Load()
	if uri == "" || t == nil {
		return false // the library answers a malformed request
	}
	srv, ok := t.resourceServer(uri)
	peer := &httpPeer{w: w, s: s, sess: sess, level: -1}
	if msg.Method == string(mcp.MethodResourcesUnsubscribe) {
		// The server the subscription was made with ends it, whether or
		// not it lists the URI now.
		if held, had := sess.unsubscribe(uri); had {
			sub.Unsubscribe(held, uri)
			s.dropSubscriptions(1)
		} else if !ok {
			return false // the library's {}: nothing to end
		}
		peer.finish(msg.ID, json.RawMessage("{}"), nil)
		return true
	}
	if !ok {
		// No server has it: a subscription that could never notify is
		// refused as a read of it is (the library answered {}), naming
		// the servers not ready, whose resources are withdrawn.
		message := fmt.Sprintf("resource not found: no server lists %q or a template it matches", uri)
		if ul, ok := s.backend.(UnreadyLister); ok {
			if names := ul.UnreadyServers(); len(names) > 0 {
				message = fmt.Sprintf("resource not found: no ready server lists %q or a template it matches (not ready: %s)", uri, strings.Join(names, ", "))
			}
		}
		data, _ := json.Marshal(map[string]string{"uri": uri})
		peer.finish(msg.ID, nil, &relay.RPCError{Code: mcp.RESOURCE_NOT_FOUND, Message: message, Data: data})
		return true
	}
	held, had, why := sess.reserve(uri)
	if had && held == srv {
		peer.finish(msg.ID, json.RawMessage("{}"), nil)
		return true
	}
	if why != "" {
		peer.finish(msg.ID, nil, &relay.RPCError{Code: relay.CodeInvalidParams, Message: "subscription refused: " + why})
		return true
	}
	if !had {
		// The place kept for it goes once the subscription is recorded,
		// or with its failure.
		defer sess.release()
	}
	if !s.holdSubscription() {
		peer.finish(msg.ID, nil, &relay.RPCError{Code: relay.CodeInternal, Message: fmt.Sprintf(
			"subscription refused: proxyd's clients hold %d subscriptions, the most it keeps; %s", maxSubscriptionsInAll, subscriptionBoundsAdvice)})
		return true
	}
	if err := sub.Subscribe(r.Context(), srv, uri); err != nil {
		s.dropSubscriptions(1)
		rpc, ok := relay.IsRPCError(err)
		if !ok {
			rpc = &relay.RPCError{Code: relay.CodeInternal, Message: err.Error()}
		}
		peer.finish(msg.ID, nil, rpc)
		return true
	}
	// A URI another server lists now (the first holder's list changed)
	// moves to it: the session's updates come from the server that serves
	// the URI. Whatever the record held before is released, so the
	// upstream counts stay even when two subscribes of a URI race.
	if held, had := sess.subscribe(uri, srv); had {
		sub.Unsubscribe(held, uri)
		s.dropSubscriptions(1)
	}
	peer.finish(msg.ID, json.RawMessage("{}"), nil)
	return true
}

// subscribe records uri, held by server srv, for the session, and
// returns the server that held it before, if any.
func (s *session) subscribe(uri, srv string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = map[string]string{}
	}
	held, had := s.subs[uri]
	s.subs[uri] = srv
	return held, had
}

// holder returns the server the session's subscription to uri is held
// by (false when the session is not subscribed).
func (s *session) holder(uri string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.subs[uri]
	return srv, ok
}

// reserve is holder for a subscribe: when the session holds no
// subscription to uri, one more must fit its bound (why says why not, as
// subscriptionRefused), counting the subscribes under way, and a place
// is kept for it until release.
func (s *session) reserve(uri string) (held string, had bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, had = s.subs[uri]; had {
		return held, true, ""
	}
	if why = subscriptionRefused(uri, len(s.subs)+s.subscribing); why == "" {
		s.subscribing++
	}
	return "", false, why
}

// release gives back the place reserve kept.
func (s *session) release() {
	s.mu.Lock()
	s.subscribing--
	s.mu.Unlock()
}

// unsubscribe forgets uri for the session and returns the server that
// held it; false when the session was not subscribed.
func (s *session) unsubscribe(uri string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.subs[uri]
	delete(s.subs, uri)
	return srv, ok
}

// endSubscriptions drops an ended session's upstream subscriptions.
func (s *Server) endSubscriptions(sess *session) {
	sub, ok := s.backend.(Subscriber)
	if !ok {
		return
	}
	sess.mu.Lock()
	uris := sess.subs
	sess.subs = nil
	sess.mu.Unlock()
	for uri, srv := range uris {
		sub.Unsubscribe(srv, uri)
	}
	s.dropSubscriptions(len(uris))
}

// listen serves a modern client's subscriptions/listen: an acknowledgement
// naming what was established, then the notifications asked for until the
// client closes the stream or proxyd stops.
func (s *Server) listen(w http.ResponseWriter, r *http.Request, msg relay.Message) bool {
	var p struct {
		Notifications mcp.SubscriptionFilter `json:"notifications"`
	}
	if json.Unmarshal(msg.Params, &p) != nil {
		return false
	}
	release, ok := s.holdStream(&s.listening)
	if !ok {
		refuseStream(w, s.maxStreams.Load())
		return true
	}
	defer release()
	// A listen stream stays open to wait for notifications: not a
	// request in flight (see guard), or the activity writer would find
	// no moment without one for as long as a client listens.
	procs.Served()
	defer procs.Serve()
	sub, _ := s.backend.(Subscriber)
	t := s.table.Load()
	want := p.Notifications
	allowed := mcp.SubscriptionFilter{ToolsListChanged: want.ToolsListChanged, PromptsListChanged: want.PromptsListChanged,
		ResourcesListChanged: want.ResourcesListChanged}
	x := &listener{id: msg.ID, uris: map[string]string{}, peer: &httpPeer{w: w, s: s, modern: true, level: -1}}
	x.out = relay.NewOutbox(func(method string, params json.RawMessage) { x.peer.event(notification(method, params), true) })
	// The stream's subscriptions end with it, each on the server that
	// holds it (x.uris is not written once the stream is listed).
	defer func() {
		for uri, srv := range x.uris {
			sub.Unsubscribe(srv, uri)
		}
		s.dropSubscriptions(len(x.uris))
	}()
	// What is not established (no server has the URI, it breaks a
	// bound, the upstream refused it) is left out of the
	// acknowledgement, which names what the stream gets.
	for _, uri := range want.ResourceSubscriptions {
		if _, dup := x.uris[uri]; sub == nil || t == nil || dup {
			continue
		}
		if why := subscriptionRefused(uri, len(x.uris)); why != "" {
			s.log.Debug("subscriptions/listen: a URI left out", "why", why)
			continue
		}
		srv, ok := t.resourceServer(uri)
		if !ok || !s.holdSubscription() {
			continue
		}
		if sub.Subscribe(r.Context(), srv, uri) != nil {
			s.dropSubscriptions(1)
			continue
		}
		x.uris[uri] = srv
		allowed.ResourceSubscriptions = append(allowed.ResourceSubscriptions, uri)
	}
	x.filter = allowed
	ack, _ := json.Marshal(map[string]any{"notifications": allowed})
	x.send(mcp.MethodNotificationSubscriptionsAcknowledged, ack)
	if !allowed.IsEmpty() {
		s.listeners.add(x)
		defer s.listeners.remove(x)
		select {
		case <-r.Context().Done():
			x.peer.close()
			s.listenDropped.Add(int64(x.out.Close()))
			return true
		case <-s.listeners.done:
		}
	}
	if n := x.out.Close(); n > 0 {
		s.listenDropped.Add(int64(n))
		s.log.Warn("dropped notifications for a subscriptions/listen client that did not read its stream: past the bound proxyd holds for one client, so that the server's other clients go on",
			"dropped", n, "bound_messages", relay.OutboxMessages, "bound_bytes", relay.OutboxBytes)
	}
	meta, _ := json.Marshal(map[string]json.RawMessage{mcp.MetaKeySubscriptionID: msg.ID})
	x.peer.finish(msg.ID, relay.WithMember([]byte(`{"resultType":"complete"}`), "_meta", meta), nil)
	return true
}

// EndStreams ends every listen stream (shutdown).
func (s *Server) EndStreams() {
	s.listeners.mu.Lock()
	defer s.listeners.mu.Unlock()
	select {
	case <-s.listeners.done:
	default:
		close(s.listeners.done)
	}
}

// listChanged tells the listen streams that asked for it that a list
// changed (legacy sessions hear it from the library).
func (s *Server) listChanged(method string) {
	s.listeners.each(func(x *listener) {
		switch method {
		case mcp.MethodNotificationToolsListChanged:
			if !x.filter.ToolsListChanged {
				return
			}
		case mcp.MethodNotificationPromptsListChanged:
			if !x.filter.PromptsListChanged {
				return
			}
		case mcp.MethodNotificationResourcesListChanged:
			if !x.filter.ResourcesListChanged {
				return
			}
		}
		x.send(method, nil)
	})
}

// Notify passes an upstream notification that belongs to no call to the
// clients it concerns: a resource update to the clients subscribed to the
// URI, a URL elicitation's completion to the session it was asked of, a
// log message to the legacy sessions that set a level it passes.
func (s *Server) Notify(server, method string, params json.RawMessage) {
	switch method {
	case mcp.MethodNotificationResourceUpdated:
		uri := relay.StringMember(params, "uri")
		if meta, ok := relay.Member(params, "_meta"); ok {
			// The upstream's own stream id means nothing to proxyd's clients.
			params = relay.WithMember(params, "_meta", relay.WithoutMember(meta, mcp.MetaKeySubscriptionID))
		}
		// Only the server a subscription is held by speaks for it: another
		// that lists the same URI (the first lists it, see the routing
		// table) is not what the client subscribed to.
		s.sessions.each(func(sess *session) {
			if held, ok := sess.holder(uri); ok && held == server {
				s.toSession(sess.id, method, params)
			}
		})
		s.listeners.each(func(x *listener) {
			if held, ok := x.uris[uri]; ok && held == server {
				x.send(method, params)
			}
		})
	case string(mcp.MethodNotificationElicitationComplete):
		if sid, ok := s.urlElicitations.take(relay.StringMember(params, "elicitationId")); ok {
			s.toSession(sid, method, params)
		}
	case relay.MethodMessage:
		l := relay.LogLevelRank(relay.StringMember(params, "level"))
		s.sessions.each(func(sess *session) {
			if lv := sess.logLevel(); lv != "" && l >= relay.LogLevelRank(lv) {
				s.toSession(sess.id, method, params)
			}
		})
	}
}

// toSession sends a notification on a legacy session's stream.
func (s *Server) toSession(id, method string, params json.RawMessage) {
	var m map[string]any
	if len(params) > 0 && json.Unmarshal(params, &m) != nil {
		return
	}
	_ = s.mcp.SendNotificationToSpecificClient(id, method, m)
}
