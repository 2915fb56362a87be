package server

import (
	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
)

const (
	admin    = client.RoleAdmin
	operator = client.RoleOperator
	reader   = client.RoleReader
)

var (
	all       = []string{admin, operator, reader}
	operators = []string{admin, operator}
	admins    = []string{admin}
)

// roles is the one table of which role may call which RPC once the node is configured (mutual TLS). In
// maintenance mode the bootstrap token allows every RPC of the machine service: there is no cluster yet.
// Readers never see secrets; only admins reset a node or read secrets (kubeconfig, etcd snapshot, join
// tokens, the config with its keys). An RPC missing here is refused to everyone.
var roles = map[string][]string{
	machine.Machine_Version_FullMethodName:  all,
	machine.Machine_Status_FullMethodName:   all,
	machine.Machine_Events_FullMethodName:   all,
	machine.Machine_Logs_FullMethodName:     all,
	machine.Machine_Dmesg_FullMethodName:    all,
	machine.Machine_Services_FullMethodName: all,
	machine.Machine_Disks_FullMethodName:    all,
	machine.Machine_Mounts_FullMethodName:   all,
	machine.Machine_Health_FullMethodName:   all,

	machine.Machine_EtcdMembers_FullMethodName:    all,
	machine.Machine_Certificates_FullMethodName:   all,
	machine.Machine_GetConfig_FullMethodName:      all, // secrets only for admins: see GetConfig
	machine.Machine_ConfigHistory_FullMethodName:  all, // no config bodies
	machine.Machine_TPMPCRs_FullMethodName:        all,
	machine.Machine_ImageList_FullMethodName:      all,
	machine.Machine_Plan_FullMethodName:           operators,
	machine.Machine_Reboot_FullMethodName:         operators,
	machine.Machine_Shutdown_FullMethodName:       operators,
	machine.Machine_ServiceStart_FullMethodName:   operators,
	machine.Machine_ServiceStop_FullMethodName:    operators,
	machine.Machine_ServiceRestart_FullMethodName: operators,
	machine.Machine_ImageImport_FullMethodName:    operators,
	machine.Machine_ImageRemove_FullMethodName:    operators,

	machine.Machine_Init_FullMethodName:             admins,
	machine.Machine_Join_FullMethodName:             admins,
	machine.Machine_Reset_FullMethodName:            admins,
	machine.Machine_Upgrade_FullMethodName:          admins,
	machine.Machine_Rollback_FullMethodName:         admins,
	machine.Machine_Install_FullMethodName:          admins,
	machine.Machine_ApplyConfig_FullMethodName:      admins,
	machine.Machine_Kubeconfig_FullMethodName:       admins,
	machine.Machine_EtcdSnapshot_FullMethodName:     admins,
	machine.Machine_EtcdRemoveMember_FullMethodName: admins,
	machine.Machine_CreateJoinToken_FullMethodName:  admins,
	machine.Machine_ListJoinTokens_FullMethodName:   admins,
	machine.Machine_RevokeJoinToken_FullMethodName:  admins,
	// A profile shows machined's internals and may hold fragments of what it handled.
	machine.Machine_Profile_FullMethodName:      admins,
	machine.Machine_WatchdogStop_FullMethodName: admins,
	// An operator's join relays the TPM's answer to the join service; on a configured node only admins
	// make it quote.
	machine.Machine_TPMAttest_FullMethodName: admins,

	// Server reflection: any authenticated caller, so generic gRPC tools work.
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      all,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": all,
}

// public RPCs answer without credentials: liveness only.
var public = map[string]bool{
	"/grpc.health.v1.Health/Check": true,
	"/grpc.health.v1.Health/Watch": true,
	"/grpc.health.v1.Health/List":  true,
}

// Allowed reports whether a role may call a method once the node uses mutual TLS.
func Allowed(role, method string) bool {
	for _, r := range roles[method] {
		if r == role {
			return true
		}
	}
	return false
}
