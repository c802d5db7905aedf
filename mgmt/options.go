package mgmt

// What `volume set` checks beyond the value (volume/options has the
// table of keys, defaults and value checks): the volume's type, and
// what depends on the volume's state.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mortarfs/mortar/mgmt/api"
	"github.com/mortarfs/mortar/mgmt/state"
	"github.com/mortarfs/mortar/volume"
	"github.com/mortarfs/mortar/volume/options"
)

// optionVolumeTypes are the volume types an option means something for;
// an option not listed applies to every volume. (A disperse set's quorum
// is its data brick count, fixed; a distribute volume has one copy.)
var optionVolumeTypes = map[string][]string{
	options.OptQuorumType:          {volume.Replicate},
	options.OptQuorumCount:         {volume.Replicate},
	options.OptFavoriteChildPolicy: {volume.Replicate},
	options.OptHealInterval:        {volume.Replicate, volume.Disperse},
	options.OptDisperseQuiet:       {volume.Disperse},
	options.OptKeepUndo:            {volume.Disperse},
}

// typeAdjective names the volumes of a type as the errors say it.
var typeAdjective = map[string]string{volume.Distribute: "distribute", volume.Replicate: "replicated", volume.Disperse: "dispersed"}

// checkVolumeType refuses an option that means nothing for v's type.
func checkVolumeType(v *state.Volume, key string) error {
	types, ok := optionVolumeTypes[key]
	if !ok || slices.Contains(types, v.Type) {
		return nil
	}
	var names []string
	for _, t := range types {
		names = append(names, typeAdjective[t])
	}
	why := "where it would mean nothing"
	switch {
	case v.Type == volume.Disperse:
		why = fmt.Sprintf("whose sets write while %d of its %d bricks are up (disperse %d redundancy %d), and that is fixed",
			v.Disperse-v.Redundancy, v.Disperse, v.Disperse, v.Redundancy)
	}
	return api.Errorf(api.ErrInvalid, "option %s applies to %s volumes only: volume %s is a %s volume, %s",
		key, strings.Join(names, " and "), v.Name, typeAdjective[v.Type], why)
}

// checkVolumeOption checks what depends on the volume as well as the
// value: the volume's type, and a fixed quorum cannot exceed the replica
// count.
func checkVolumeOption(v *state.Volume, key, value string) error {
	if err := checkVolumeType(v, key); err != nil {
		return err
	}
	if key == options.OptEncryption && v.Status != api.StatusCreated && v.Options[options.OptEncryption] != value {
		return api.Errorf(api.ErrState, "option %s can change only before the volume's first start: files already written would be unreadable (create a new volume and copy)", key)
	}
	if key != options.OptQuorumCount || v.Replica == 0 {
		return nil
	}
	if n, _ := strconv.Atoi(value); n > v.Replica {
		return api.Errorf(api.ErrInvalid, "option %s: %s is more than the replica count %d of volume %s", key, value, v.Replica, v.Name)
	}
	return nil
}

// checkOption validates a `volume set` key and value (volume/options).
func checkOption(key, value string) error {
	if err := options.Check(key, value); err != nil {
		return api.Errorf(api.ErrInvalid, "%s", err)
	}
	return nil
}
