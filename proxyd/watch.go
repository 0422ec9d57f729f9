package proxyd

import (
	"context"

	"github.com/mcpx-dev/mcpx/proxyd/config"
)

// watchConfig applies the config file whenever its content changes; a bad
// file keeps the running configuration (see apply).
func (d *Daemon) watchConfig(ctx context.Context) <-chan struct{} {
	done, err := config.Watch(ctx, d.opts.ConfigPath, func(cfg *config.Config, err error) {
		_, _ = d.apply(cfg, err)
	})
	if err != nil {
		d.log.Warn("config file not watched; use 'mcpx reload' after editing", "err", err)
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return done
}
