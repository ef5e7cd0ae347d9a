// Package strictjson decodes JSON so that it means one thing to every
// reader: one object, each member name once and exactly as sent, nothing
// after it. hcc-api reads token headers, claims and request bodies with
// it (docs/http-api.md), the Control API client the tokens it signs
// and reads, and the development Control API its request bodies.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Object decodes one JSON object into its members, keyed by their
// names exactly as sent (after JSON unescaping). Duplicate member names
// are refused: parsers disagree on which duplicate wins, and a token
// header, its claims and a request body must mean one thing to every
// reader. Anything after the object but whitespace is refused too.
func Object(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, ErrNotObject
	}
	members := make(map[string]json.RawMessage, 8)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		if _, dup := members[name]; dup {
			return nil, ErrDuplicateMember
		}
		members[name] = value
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, ErrNotObject
	}
	return members, nil
}

// String decodes raw if it is a JSON string. json.Unmarshal alone
// would also accept null (and an absent member's nil), leaving the string
// empty, so the first byte is checked first.
func String(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Errors of Object.
var (
	ErrNotObject       = errors.New("not a single JSON object")
	ErrDuplicateMember = errors.New("duplicate member name")
)
