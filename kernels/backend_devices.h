/* Private to kernels/: the device queries each backend file gives the selection table in
 * kernels/backend.c. Everyone else asks by name (backend_device_count, backend_pci_bus_id). */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices; 0 when CUDA is not built in or no device is present. */
int backend_cuda_device_count(void);
/* PCI bus id of a device ("0000:3b:00.0"), or "" when unavailable. */
void backend_cuda_pci_bus_id(int device, char *out, int len);

#ifdef __cplusplus
}
#endif
