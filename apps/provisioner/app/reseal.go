package app

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/adapters/seal"
	"github.com/rxc-project/rxc/apps/internal/appenv"
)

// ResealConfig is what `provisioner reseal` reads: the key the seeds are
// sealed with now and the one to seal them with.
type ResealConfig struct {
	PGDSN                    string `envconfig:"PG_DSN" required:"true"`
	AccountSeedEncryptionKey string `envconfig:"ACCOUNT_SEED_ENCRYPTION_KEY" required:"true" desc:"the key the seeds are sealed with now"`
	NewKey                   string `envconfig:"NEW_ACCOUNT_SEED_ENCRYPTION_KEY" required:"true" desc:"the key to seal them with (then set it as ACCOUNT_SEED_ENCRYPTION_KEY)"`
}

// reseal re-encrypts every account and user seed with the new key in one
// transaction (docs/operations.md: rotating the seed encryption key).
func reseal(ctx context.Context, stdout, stderr io.Writer) error {
	var cfg ResealConfig
	if err := appenv.Load(&cfg); err != nil {
		return err
	}
	old, err := sealerFrom("ACCOUNT_SEED_ENCRYPTION_KEY", cfg.AccountSeedEncryptionKey)
	if err != nil {
		return err
	}
	next, err := sealerFrom("NEW_ACCOUNT_SEED_ENCRYPTION_KEY", cfg.NewKey)
	if err != nil {
		return err
	}
	if cfg.NewKey == cfg.AccountSeedEncryptionKey {
		return errors.New("configuration: NEW_ACCOUNT_SEED_ENCRYPTION_KEY equals ACCOUNT_SEED_ENCRYPTION_KEY: nothing to rotate")
	}
	pool, err := appenv.ConnectMigrated(ctx, cfg.PGDSN, appenv.CLILogger(stderr), applyMigrations)
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := provisionerstore.Reseal(ctx, pool, old, next)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "resealed %d account seeds and %d user seeds with the new key", res.Accounts, res.Users)
	if res.AlreadyNew > 0 {
		fmt.Fprintf(stdout, " (%d were already sealed with it)", res.AlreadyNew)
	}
	fmt.Fprintln(stdout, "\nnext: set ACCOUNT_SEED_ENCRYPTION_KEY to the new key on every provisioner and start them")
	return nil
}

func sealerFrom(name, value string) (*seal.Sealer, error) {
	key, err := seal.ParseKey(value)
	if err != nil {
		return nil, fmt.Errorf("configuration: %s: %w", name, err)
	}
	return seal.New(key)
}
