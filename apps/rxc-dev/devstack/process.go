package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// child is a program the stack runs (nginx, the sensor agent). It gets its
// own process group, so a Ctrl-C in the terminal reaches only the stack,
// which then stops its children in order; and it is sent SIGTERM if the
// stack dies without stopping it.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startChild(bin string, args []string, out io.Writer, env []string) (*child, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// exitErr is how the child ended; only meaningful once it has.
func (c *child) exitErr() error {
	<-c.done
	return c.err
}

// stop sends sig and waits; when ctx ends first the process group is killed.
func (c *child) stop(ctx context.Context, sig syscall.Signal) error {
	if !c.running() {
		return nil
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
		var exit *exec.ExitError
		if c.err != nil && !errors.As(c.err, &exit) {
			return c.err
		}
		return nil
	case <-ctx.Done():
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("%s did not stop in time and was killed", c.cmd.Path)
	}
}
