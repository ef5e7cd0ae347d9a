// Package guards holds tests that keep the layering of docs/style.md
// ("Layout shows the architecture") true as the code grows. It has no
// production code: imports_test.go parses the module's sources and fails on
// an import a package or file must not have.
package guards
