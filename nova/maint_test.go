package nova_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dvms-project/dvms/nova"
)

func TestParseMaintenanceActions(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []nova.MaintenanceAction
		wantErr string
	}{
		{in: "cold_migrate", want: []nova.MaintenanceAction{nova.MaintColdMigrate}},
		{in: " live_migrate , cold_migrate,shelve_offload,notify", want: []nova.MaintenanceAction{nova.MaintLiveMigrate, nova.MaintColdMigrate, nova.MaintShelveOffload, nova.MaintNotify}},
		{in: "", wantErr: "none given"},
		{in: " , ", wantErr: "none given"},
		{in: "cold-migrate", wantErr: "want live_migrate, cold_migrate"},
		{in: "cold_migrate,cold_migrate", wantErr: "listed twice"},
		{in: "notify,cold_migrate", wantErr: "notify must be last"},
	} {
		got, err := nova.ParseMaintenanceActions(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v %v, want error %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}
