package kit

import (
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/types"
)

// The log fields every reconciler's lines carry (docs/reconcilers.md#logs):
// which reconciler wrote the line, and the object it is about as
// namespace/name, always under the same keys, so one query finds every line
// about one object whichever reconciler wrote it.
const (
	LogController = "controller"
	LogObject     = "object"
)

// LogObjectOf returns log with the object namespace/name under LogObject.
func LogObjectOf(log zerolog.Logger, namespace, name string) zerolog.Logger {
	return log.With().Str(LogObject, types.NamespacedName{Namespace: namespace, Name: name}.String()).Logger()
}
