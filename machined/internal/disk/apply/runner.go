package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/machined/internal/proc"
)

// Runner runs a tool to completion and returns its combined output. A non-zero exit comes back as
// *ExitError, so callers can read the exit code (fsck tools use it to say what they did).
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExitError is a tool that ran and exited non-zero.
type ExitError struct {
	Tool   string
	Args   []string
	Code   int
	Output []byte
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%s %s exited with status %d: %s", e.Tool, strings.Join(e.Args, " "), e.Code, tail(e.Output))
}

// tail keeps the last lines of a tool's output, enough to see why it failed without flooding an error.
func tail(out []byte) string {
	const maxLines = 6
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > maxLines {
		lines = append([]string{"..."}, lines[len(lines)-maxLines:]...)
	}
	return strings.Join(lines, " | ")
}

// ExecRunner runs tools as child processes with no standard input, so a tool that wants to ask a question
// gets end-of-file instead of hanging.
type ExecRunner struct {
	// Path lists the directories searched for tools; empty means $PATH, or the usual sbin and bin
	// directories when $PATH is unset (machined runs as PID 1 with an empty environment).
	Path []string
	// Starter starts the tool and reports its exit (PID 1's reaper on a real node); nil means os/exec.
	Starter proc.Starter
}

var defaultToolPath = []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	bin, err := r.lookPath(name)
	if err != nil {
		return nil, err
	}
	out, err := proc.Output(ctx, r.Starter, exec.Command(bin, args...))
	var exit interface{ ExitCode() int }
	switch {
	case err == nil:
		return out, nil
	case ctx.Err() != nil:
		return out, fmt.Errorf("%s: %w", name, ctx.Err())
	case errors.As(err, &exit):
		return out, &ExitError{Tool: name, Args: args, Code: exit.ExitCode(), Output: out}
	default:
		return out, fmt.Errorf("run %s: %w", name, err)
	}
}

func (r ExecRunner) lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	dirs := r.Path
	if len(dirs) == 0 {
		if p := os.Getenv("PATH"); p != "" {
			dirs = filepath.SplitList(p)
		} else {
			dirs = defaultToolPath
		}
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("tool %s not found in %s: the image must include it", name, strings.Join(dirs, ":"))
}
