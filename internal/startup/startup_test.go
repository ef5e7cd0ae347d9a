package startup

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPrintInvalidConfigIsOneFatalLine(t *testing.T) {
	var stderr bytes.Buffer
	err := errors.Join(errors.New("A: not a number"), errors.New("B: \"x  y\" has spaces"))
	PrintInvalidConfig(&stderr, "hcc-api", err)
	assert.Equal(t, "[HCC] FATAL hcc-api: invalid configuration: A: not a number B: \"x  y\" has spaces\n", stderr.String(),
		"one line, whatever the error holds; the rest of the message kept")
}
