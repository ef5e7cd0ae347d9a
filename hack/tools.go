//go:build tools

// Package hack pins build-time tools in go.mod so that hack/update-codegen.sh
// runs the exact code-generator version the module requires.
package hack

import (
	_ "k8s.io/code-generator"
)
