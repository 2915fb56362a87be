// Package configapply decides how a changed machine config reaches a running node (the modes of
// `cairnctl apply`), keeps the history of the configs applied to it, and times a try: a config applied in
// try mode is undone by itself unless confirmed in time. Applying the changes is the node's and the
// workload's job; this package holds the rules, so they are unit-tested in one place.
package configapply
