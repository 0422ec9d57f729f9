package proxyd

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/mcpx-dev/mcpx/proxyd/config"
	"github.com/mcpx-dev/mcpx/proxyd/store"
)

// openState opens the state database: PostgreSQL when MCPX_STATE_DSN or
// state.postgres names one, else the SQLite file in the state dir.
func openState(ctx context.Context, cfg *config.Config, stateDir, replica string) (*store.DB, error) {
	dsn, err := cfg.StateDSN()
	if err != nil {
		return nil, err
	}
	if dsn == "" {
		return store.Open(filepath.Join(stateDir, DBFile))
	}
	db, err := store.OpenPostgres(ctx, dsn, "mcpx-proxyd "+replica)
	if err != nil {
		return nil, fmt.Errorf("opening the shared state: %w", err)
	}
	return db, nil
}
