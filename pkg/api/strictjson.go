package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// decodeObject decodes one JSON object into its members, keyed by their
// names exactly as sent (after JSON unescaping). Duplicate member names
// are refused: parsers disagree on which duplicate wins, and a token
// header, its claims and a request body must mean one thing to every
// reader. Anything after the object but whitespace is refused too.
func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errNotObject
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
			return nil, errDuplicateMember
		}
		members[name] = value
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errNotObject
	}
	return members, nil
}

// jsonString decodes raw if it is a JSON string. json.Unmarshal alone
// would also accept null (and an absent member's nil), leaving the string
// empty, so the first byte is checked first.
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

var (
	errNotObject       = errors.New("not a single JSON object")
	errDuplicateMember = errors.New("duplicate member name")
)
