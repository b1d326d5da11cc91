/* gpu_smi.h - `nvidia-smi -q -x` XML (libxml2) into the report's gpu.nvidia_smi object.
 *
 * {driver_version, cuda_version, timestamp, attached_gpus, gpus[]{index, pci, uuid, name,
 *  memory_used_mib, memory_total_mib, memory_used_pct, ecc{volatile_sbe, volatile_dbe,
 *  aggregate_sbe, aggregate_dbe}, retired_pages{sbe, dbe, pending}, remapped_rows{correctable,
 *  uncorrectable, pending, failure}, temperature_c, memory_temperature_c, power_w, power_limit_w,
 *  throttle_reasons[], processes[]{pid, name, type, used_mib}, own}}: a value the XML does not
 * have, or has as "N/A", is null.
 *
 * Element names changed across driver versions and all are read: ECC as
 * single_bit/double_bit totals (Pascal) or sram_/dram_(un)correctable (510+) with the v13 split of
 * sram_uncorrectable into _parity + _secded; clocks_throttle_reasons (<= 515) and
 * clocks_event_reasons (535+); power_readings/power_draw (<= 515), gpu_power_readings/power_draw
 * (535) and instant_/average_power_draw (595).
 *
 * The XML is untrusted: at most GPU_SMI_MAX bytes, no network (XML_PARSE_NONET), no DTD loading, no
 * entity substitution, and a document that declares entities is refused (no billion laughs).
 * Library code: never prints (libxml2's error output is silenced), never exits.
 */
#ifndef CRASHPACK_GPU_SMI_H
#define CRASHPACK_GPU_SMI_H
#include <cjson/cJSON.h>
#include <stddef.h>

#define GPU_SMI_MAX (16u << 20)

/* The parsed object, or NULL with the reason in err ("not XML: ...", "refused: ..."). */
cJSON *gpu_smi_parse(const char *xml, size_t len, char *err, size_t errlen);

#endif
