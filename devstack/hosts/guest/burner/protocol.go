package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxRequest bounds one request; longer input is dropped with an error reply.
const maxRequest = 64 << 10

// delimiter is the byte the guest agent protocol uses to resynchronise a
// stream: a client may send it to reset the parser, and guest-sync-delimited
// asks the agent to send it before its reply.
const delimiter = 0xFF

// request is one guest agent command.
type request struct {
	Execute   string          `json:"execute"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	ID        json.RawMessage `json:"id,omitempty"`
}

// agentError is the guest agent's error object.
type agentError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

// reply is either {"return": ...} or {"error": {...}}, one line each.
type reply struct {
	Return any             `json:"return,omitempty"`
	Error  *agentError     `json:"error,omitempty"`
	ID     json.RawMessage `json:"id,omitempty"`
}

// errUnknownCommand is answered with the CommandNotFound class, as qemu-ga does.
var errUnknownCommand = errors.New("burner: command not found")

// handler executes one command. delimited asks for the 0xFF byte before the
// reply (guest-sync-delimited).
type handler interface {
	handle(execute string, args json.RawMessage) (result any, delimited bool, err error)
}

// readObjects splits a byte stream into JSON objects the way a guest agent
// must: it skips anything between objects, resets on the 0xFF delimiter, and
// does not depend on line endings. It calls emit for each complete object (or
// for a parse problem with a nil object) and returns the reader's error.
func readObjects(r io.Reader, emit func(obj []byte, problem error) error) error {
	br := bufio.NewReader(r)
	var (
		buf      bytes.Buffer
		depth    int
		inString bool
		escaped  bool
	)
	reset := func() { buf.Reset(); depth, inString, escaped = 0, false, false }
	for {
		b, err := br.ReadByte()
		if err != nil {
			return err
		}
		if b == delimiter {
			reset()
			continue
		}
		if depth == 0 {
			if b == '{' {
				buf.WriteByte(b)
				depth = 1
			}
			continue // whitespace or stray bytes between objects
		}
		buf.WriteByte(b)
		switch {
		case escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
		}
		if depth == 0 {
			obj := append([]byte(nil), buf.Bytes()...)
			reset()
			if err := emit(obj, nil); err != nil {
				return err
			}
			continue
		}
		if buf.Len() > maxRequest {
			reset()
			if err := emit(nil, fmt.Errorf("request longer than %d bytes", maxRequest)); err != nil {
				return err
			}
		}
	}
}

// serve answers requests from rw until it returns an error (io.EOF when the
// host side closes). Each reply is one line, as libvirt's agent client reads
// them.
func serve(rw io.ReadWriter, h handler) error {
	w := bufio.NewWriter(rw)
	send := func(delimited bool, rep reply) error {
		line, err := json.Marshal(rep)
		if err != nil {
			return fmt.Errorf("encode reply: %w", err)
		}
		if delimited {
			w.WriteByte(delimiter)
		}
		w.Write(line)
		w.WriteByte('\n')
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write reply: %w", err)
		}
		return nil
	}
	return readObjects(rw, func(obj []byte, problem error) error {
		if problem != nil {
			return send(false, reply{Error: &agentError{Class: "GenericError", Desc: problem.Error()}})
		}
		var req request
		if err := json.Unmarshal(obj, &req); err != nil || req.Execute == "" {
			desc := "expected {\"execute\": NAME, \"arguments\": {...}}"
			if err != nil {
				desc = "invalid JSON: " + err.Error()
			}
			return send(false, reply{Error: &agentError{Class: "GenericError", Desc: desc}})
		}
		result, delimited, err := h.handle(req.Execute, req.Arguments)
		switch {
		case errors.Is(err, errUnknownCommand):
			return send(false, reply{ID: req.ID, Error: &agentError{Class: "CommandNotFound", Desc: err.Error()}})
		case err != nil:
			return send(false, reply{ID: req.ID, Error: &agentError{Class: "GenericError", Desc: err.Error()}})
		}
		if result == nil {
			result = struct{}{}
		}
		return send(delimited, reply{ID: req.ID, Return: result})
	})
}
