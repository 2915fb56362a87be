// Package health holds the result of one of the node's health checks, shared by the code that runs the
// checks (workload) and the API that reports them (server), so neither imports the other for it.
package health

// Check is one health check's result: Err nil means it passed, and Message says what was seen.
type Check struct {
	Name    string
	Err     error
	Message string
}
