package consensus

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The merge arbiter's bus protocol (versioned JSON, version wireVersion).
//
// Requests go to RequestSubject(region); every member running a raft node
// subscribes. Answers go to the reply subject the caller named, a subject
// of its own under ReplySubject(region) + "." + its host (decodeReq
// checks), matched by request id.
//
//   - register, merge, dissolve, get: only the member that leads answers:
//     the decision, or err "no_quorum" (not applied: it lost leadership
//     before proposing) or "unknown" (proposed, outcome unknown). Other
//     members stay silent, so no answer can mask the leader's.
//   - status: carries the sender's state (every agent running a raft
//     node sends one each probe interval); members of a group answer
//     with their own state. This is what bootstrapping and voter
//     management go by.
const wireVersion = 1

// RequestSubject is where the members of region's arbiter group take
// requests.
func RequestSubject(region string) string { return "dvms." + region + ".arbiter.req" }

// ReplySubject is the prefix of the subjects callers receive answers on.
func ReplySubject(region string) string { return "dvms." + region + ".arbiter.reply" }

const (
	kindRegister = "register"
	kindMerge    = "merge"
	kindDissolve = "dissolve"
	kindGet      = "get"
	kindStatus   = "status"

	errCodeNoQuorum = "no_quorum"
	errCodeUnknown  = "unknown"
)

type wireReq struct {
	V     int           `json:"v"`
	ID    string        `json:"id"`
	From  string        `json:"from"`
	Reply string        `json:"reply"`
	Kind  string        `json:"kind"`
	Reg   *Registration `json:"reg,omitempty"`
	P     *Ref          `json:"p,omitempty"`
	Q     *Ref          `json:"q,omitempty"`
	Key   string        `json:"key,omitempty"`   // get: the partition id
	State *wireState    `json:"state,omitempty"` // status: the sender's state
}

type wireReply struct {
	V        int        `json:"v"`
	ID       string     `json:"id"`
	From     string     `json:"from"`
	Err      string     `json:"err,omitempty"`
	Msg      string     `json:"msg,omitempty"`
	Decision *Decision  `json:"decision,omitempty"`
	Record   *Record    `json:"record,omitempty"`
	Found    bool       `json:"found,omitempty"`
	State    *wireState `json:"state,omitempty"`
}

// wireState is what a member says about itself in status messages.
type wireState struct {
	ID      string `json:"id"`
	Addr    string `json:"addr,omitempty"`
	Running bool   `json:"running"` // its raft node runs
	// Member: its node is in its group's configuration (it has a group).
	Member bool `json:"member"`
	// Learner: its node is in the configuration as a non-voter,
	// catching up before it is promoted.
	Learner  bool     `json:"learner,omitempty"`
	Learners []string `json:"learners,omitempty"`
	IsLeader bool     `json:"is_leader,omitempty"`
	Leader   string   `json:"leader,omitempty"`
	Voters   []string `json:"voters,omitempty"`
	Group    string   `json:"group,omitempty"`
	// Candidate: it has no group and would bootstrap one (see maybeBootstrap).
	Candidate bool `json:"candidate,omitempty"`
}

// command is the FSM command a register, merge or dissolve request asks
// for (decodeReq checked that its fields are there).
func (r wireReq) command() Command {
	switch r.Kind {
	case kindRegister:
		return Command{Op: OpRegister, Reg: *r.Reg}
	case kindMerge:
		return Command{Op: OpMerge, P: *r.P, Q: *r.Q}
	}
	return Command{Op: OpDissolve, P: *r.P}
}

const maxIDLen = 256

// decodeReq decodes and checks a request; region scopes reply subjects.
func decodeReq(data []byte, region string) (wireReq, error) {
	var r wireReq
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("undecodable request: %w", err)
	}
	var errs []error
	if r.V != wireVersion {
		errs = append(errs, fmt.Errorf("version %d, want %d", r.V, wireVersion))
	}
	if r.ID == "" || len(r.ID) > maxIDLen || r.From == "" || len(r.From) > maxIDLen {
		errs = append(errs, errors.New("id and from are required"))
	}
	// Answers go under the sender's own host (the only replies NATS
	// lets it read): a request cannot aim the leader's answers at
	// another agent.
	if own := ReplySubject(region) + "." + r.From + "."; !strings.HasPrefix(r.Reply, own) || strings.ContainsAny(r.Reply, " \t\r\n*>") ||
		strings.Contains(r.Reply[len(own):], ".") {
		errs = append(errs, fmt.Errorf("reply subject %q outside %s", r.Reply, own+"*"))
	}
	switch r.Kind {
	case kindRegister:
		if r.Reg == nil {
			errs = append(errs, errors.New("register without reg"))
		}
	case kindMerge:
		if r.P == nil || r.Q == nil {
			errs = append(errs, errors.New("merge without p and q"))
		}
	case kindDissolve:
		if r.P == nil {
			errs = append(errs, errors.New("dissolve without p"))
		}
	case kindGet:
		if r.Key == "" {
			errs = append(errs, errors.New("get without key"))
		}
	case kindStatus:
		if r.State == nil || r.State.ID != r.From {
			errs = append(errs, errors.New("status without the sender's state"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown kind %q", r.Kind))
	}
	return r, errors.Join(errs...)
}

// decodeReply decodes an answer; it is checked against the pending
// request it names.
func decodeReply(data []byte) (wireReply, error) {
	var r wireReply
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("undecodable answer: %w", err)
	}
	if r.V != wireVersion || r.ID == "" {
		return r, fmt.Errorf("answer version %d id %q: ignored", r.V, r.ID)
	}
	return r, nil
}

// newToken returns a random token usable as a subject token.
func newToken() string { return strings.ToLower(rand.Text()) }
