package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dvms-project/dvms/bus"
	"github.com/dvms-project/dvms/nova"
)

// Demand queries: an executor re-checking a move to a host its own source
// does not measure (a cgroup source measures only its machine) asks that
// host's agent for its latest local measurement over the bus — no Nova
// request, at most one monitor interval old. When the agent does not
// answer within QueryTimeout, the executor takes the demand from the plan's
// snapshot.

// QueryTimeout bounds a demand query's first wait (in the runner's
// clock); it is sent queryTries times in all, each wait twice the last
// (3.5 s in all).
const QueryTimeout = 500 * time.Millisecond

const queryTries = 3

type demandQuery struct {
	V     int    `json:"v"`
	ID    string `json:"id"`
	Reply string `json:"reply"`
	// Request is the asking plan's request id (nova.RequestID): the
	// answering agent reads its source under it, so a source that keeps
	// track (nova/fake's observer) knows which demand the plan saw.
	Request string `json:"request,omitempty"`
	// Grant, when set, asks for a fenced action's grant (fence.go)
	// instead of the demand.
	Grant *grantAsk `json:"grant,omitempty"`
}

type demandAnswer struct {
	V      int                    `json:"v"`
	ID     string                 `json:"id"`
	Host   string                 `json:"host"`
	At     time.Time              `json:"at"`
	Demand map[string]nova.Demand `json:"demand"`
	// CPUs and RAMMB: the host's capacity as its agent last read it from
	// Nova (0: not read yet). Still sent for older agents; this version
	// judges an OVERLOAD on Nova's capacity (executor_reason.go).
	CPUs  float64 `json:"cpus,omitempty"`
	RAMMB float64 `json:"ram_mb,omitempty"`
	// Grant answers a grant request (no demand then).
	Grant *grantAnswer `json:"grant,omitempty"`
}

// queries matches answers to the queries of one runner.
type queries struct {
	mu      sync.Mutex
	seq     uint64
	waiting map[string]chan demandAnswer
}

// answerDemand is the handler of this host's demand subject; from is
// the asker the bus authenticated ("" on an unsigned bus).
func (r *Runner) answerDemand(_, from string, data []byte) {
	var q demandQuery
	if err := json.Unmarshal(data, &q); err != nil || q.V != 1 || q.Reply == "" || q.ID == "" {
		r.dropped.Add(1)
		r.log.Warn().Int("bytes", len(data)).Msg("malformed demand query rejected")
		return
	}
	if q.Grant != nil {
		r.answerGrant(q, from)
		return
	}
	// A fresh local measurement (cheap: cgroup files, a file, a local
	// Prometheus); the last sample's when the source fails now.
	d, at, ok := r.measureNow(q.Request)
	if !ok {
		return // nothing measured: the asker skips the move
	}
	ans := demandAnswer{V: 1, ID: q.ID, Host: r.agent.ID(), At: at, Demand: d}
	if h, ok := r.LastSample(); ok {
		ans.CPUs, ans.RAMMB = h.CPUs, h.RAMMB
	}
	out, err := json.Marshal(ans)
	if err == nil {
		err = r.d.Bus.Publish(context.Background(), q.Reply, out)
	}
	if err != nil {
		r.log.Warn().Err(err).Msg("demand answer not sent")
	}
}

// receiveAnswer is the handler of this runner's reply subject.
// On a signed bus (from != "") the answer must be its signer's.
func (r *Runner) receiveAnswer(_, from string, data []byte) {
	var a demandAnswer
	if err := json.Unmarshal(data, &a); err != nil || a.V != 1 || (from != "" && a.Host != from) {
		r.dropped.Add(1)
		return
	}
	r.q.mu.Lock()
	ch := r.q.waiting[a.ID]
	delete(r.q.waiting, a.ID)
	r.q.mu.Unlock()
	if ch != nil {
		ch <- a // buffered 1, sent once
	}
}

// askDemand asks host's agent for its latest measurement.
func (r *Runner) askDemand(ctx context.Context, host string) (map[string]nova.Demand, error) {
	a, err := r.ask(ctx, host, demandQuery{Request: nova.RequestID(ctx)}, "its demand")
	if err != nil {
		return nil, err
	}
	return a.Demand, nil
}

// ask sends q to host's agent and returns its answer (what: what is
// asked, for errors).
func (r *Runner) ask(ctx context.Context, host string, q demandQuery, what string) (demandAnswer, error) {
	r.q.mu.Lock()
	r.q.seq++
	id := r.agent.ID() + "-" + strconv.FormatUint(r.q.seq, 36)
	ch := make(chan demandAnswer, 1)
	r.q.waiting[id] = ch
	r.q.mu.Unlock()
	defer func() {
		r.q.mu.Lock()
		delete(r.q.waiting, id)
		r.q.mu.Unlock()
	}()
	q.V, q.ID, q.Reply = 1, id, bus.ReplySubject(r.cfg.Region, r.agent.ID())
	data, err := json.Marshal(q)
	if err != nil {
		return demandAnswer{}, err
	}
	// The query is sent again, waiting twice as long each time
	// (QueryTimeout, then 2 and 4 times it): an agent late by a moment (a
	// busy process, a stalled bus) answers one of them, and a late answer
	// to an earlier one counts (same id).
	wait := QueryTimeout
	for try := 1; ; try++ {
		if err := r.d.Bus.Publish(ctx, bus.DemandSubject(r.cfg.Region, host), data); err != nil {
			return demandAnswer{}, fmt.Errorf("ask %s for %s: %w", host, what, err)
		}
		select {
		case a := <-ch:
			if a.Host != host {
				return demandAnswer{}, fmt.Errorf("%s of %s answered by %q", what, host, a.Host)
			}
			return a, nil
		case <-r.d.Clock.After(wait):
			if try >= queryTries {
				return demandAnswer{}, errors.New(what + " of " + host + ": no answer from its agent")
			}
			wait *= 2
		case <-ctx.Done():
			return demandAnswer{}, ctx.Err()
		}
	}
}

// measureNow reads the local source for this host now, within
// QueryTimeout, under the asking plan's request id (if any); the last
// sample's measurement when that fails.
func (r *Runner) measureNow(request string) (map[string]nova.Demand, time.Time, bool) {
	if r.d.Demand != nil {
		ctx, cancel := context.WithTimeout(context.Background(), QueryTimeout)
		if request != "" {
			ctx = nova.WithRequestID(ctx, request)
		}
		d, err := r.d.Demand.Demand(ctx, r.agent.ID())
		cancel()
		if err == nil && d != nil {
			return d, r.d.Clock.Now(), true
		}
	}
	return r.lastMeasured()
}
