// SPDX-License-Identifier: Apache-2.0
// A stand-in for the NVIDIA driver's libnvidia-ml.so.1, for the system-metrics tests on machines without a GPU:
// the few NVML entry points Spur's sampler calls, with the types nvml.h gives them, answering for
// $SPUR_FAKE_NVML_DEVICES devices (default 4). Device i has the UUID "GPU-fake-i", is 10*i + 5 % busy, uses
// i + 1 GiB and draws 100 + i W, so a test can tell which devices were read. Tests put its folder first on
// LD_LIBRARY_PATH; it is never installed.
#include <cstdlib>
#include <cstring>

namespace {

constexpr unsigned kMostDevices = 64;
char handles[kMostDevices];  // a device's handle is the address of its byte here (never null)

unsigned devices() {
  const char* text = std::getenv("SPUR_FAKE_NVML_DEVICES");
  const auto count = text ? static_cast<unsigned>(std::strtoul(text, nullptr, 10)) : 4U;
  return count < kMostDevices ? count : kMostDevices;
}

unsigned index_of(void* device) { return static_cast<unsigned>(static_cast<char*>(device) - handles); }

bool valid(void* device) {
  return device != nullptr && static_cast<char*>(device) >= handles && index_of(device) < devices();
}

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotFound = 6;

}  // namespace

extern "C" {

int nvmlInit_v2() { return kSuccess; }
int nvmlShutdown() { return kSuccess; }

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = devices();
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= devices()) return kInvalidArgument;
  *device = &handles[index];
  return kSuccess;
}

int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  const char* prefix = "GPU-fake-";
  if (std::strncmp(uuid, prefix, std::strlen(prefix)) != 0) return kNotFound;
  return nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned>(std::strtoul(uuid + std::strlen(prefix), nullptr, 10)),
                                       device) == kSuccess
             ? kSuccess
             : kNotFound;
}

int nvmlDeviceGetIndex(void* device, unsigned* index) {
  if (!valid(device)) return kInvalidArgument;
  *index = index_of(device);
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, unsigned* rates) {  // nvmlUtilization_t: {gpu, memory}
  if (!valid(device)) return kInvalidArgument;
  rates[0] = 10 * index_of(device) + 5;
  rates[1] = 0;
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, unsigned long long* memory) {  // nvmlMemory_t: {total, free, used}
  if (!valid(device)) return kInvalidArgument;
  memory[0] = 80ULL << 30;
  memory[2] = (static_cast<unsigned long long>(index_of(device)) + 1) << 30;
  memory[1] = memory[0] - memory[2];
  return kSuccess;
}

int nvmlDeviceGetPowerUsage(void* device, unsigned* milliwatts) {
  if (!valid(device)) return kInvalidArgument;
  *milliwatts = 1000 * (100 + index_of(device));
  return kSuccess;
}

}  // extern "C"
