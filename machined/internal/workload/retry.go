package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// How the workload's one-shot API requests (the add-ons, the bootstrap objects, the Node's labels and
// taints) ride out a busy or settling API server: they are asked again until they succeed, the API
// server refuses them as invalid, or their task's deadline ends.

// retryEvery is how often untilInvalid asks the API server again.
const retryEvery = 2 * time.Second

// untilInvalid calls f every interval until it succeeds, the API server refuses the request as invalid,
// or ctx ends (then with f's last error).
func untilInvalid(ctx context.Context, interval time.Duration, f func(context.Context) error) error {
	for {
		fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := f(fctx)
		cancel()
		if err == nil || kubeapi.IsInvalid(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
