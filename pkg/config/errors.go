package config

import "strings"

// Problem is one invalid variable.
type Problem struct {
	Var    string
	Reason string
}

// Error lists every invalid variable found by one load, in declaration order.
// Reasons never quote secret values.
type Error struct {
	Problems []Problem
}

// Error renders the problems on one line, "NAME: reason; NAME: reason", so a
// binary that exits with it leaves a single log line naming every variable.
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Var + ": " + p.Reason
	}
	return strings.Join(parts, "; ")
}

// newError returns an *Error for the non-empty reasons, indexed like
// variables, or nil when there are none.
func newError(reasons []string) error {
	var problems []Problem
	for i, r := range reasons {
		if r != "" {
			problems = append(problems, Problem{Var: variables[i].name, Reason: r})
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &Error{Problems: problems}
}
