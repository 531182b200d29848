package daemon

import (
	"fmt"

	"github.com/dvms-project/dvms/bus/auth"
)

// swimKeys are the agent's signer and the region's keyring for SWIM
// (node.SwimConfig.Signer, Keyring: members bound to keys_dir), or nils
// when running unsigned.
func swimKeys(cfg Config) (*auth.Signer, *auth.Keyring, error) {
	if cfg.KeysDir == "" {
		return nil, nil, nil
	}
	signer, err := auth.LoadSigner(cfg.KeysDir, cfg.Agent.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
	}
	ring, err := auth.LoadKeyring(cfg.KeysDir)
	if err != nil {
		return nil, nil, fmt.Errorf("[DEFAULT] keys_dir: %w", err)
	}
	return signer, ring, nil
}
