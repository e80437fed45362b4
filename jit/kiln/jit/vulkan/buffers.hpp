#pragma once
// Which memory types kiln uses, and one VkBuffer with its own VkDeviceMemory (the unit the
// arena and the upload pool are made of).
#include "kiln/jit/vulkan/arena.hpp"

#include <string>
#include <string_view>

namespace kiln::jit::vk {

struct memory_choice {
  std::uint32_t device_type = 0; // tensors live here
  bool device_mapped = false;    // ... and the host reaches them with memcpy
  std::uint32_t upload_type = 0; // parameter buffers and staging copies
};

// Tensors: a DEVICE_LOCAL type; mapped when it is also HOST_VISIBLE|HOST_COHERENT (lavapipe,
// integrated GPUs, resizable BAR) unless `force_staging`. Uploads: HOST_VISIBLE|HOST_COHERENT
// (always present), HOST_CACHED preferred since staging copies are also read back.
inline memory_choice choose_memory(const VkPhysicalDeviceMemoryProperties& mp, bool force_staging,
                                   const std::string& device) {
  constexpr VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  constexpr VkMemoryPropertyFlags cached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  constexpr VkMemoryPropertyFlags odd =
      VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT | VK_MEMORY_PROPERTY_PROTECTED_BIT;
  auto heap_size = [&](std::uint32_t t) {
    return mp.memoryHeaps[mp.memoryTypes[t].heapIndex].size;
  };
  // The first type with `need` (and none of `odd`), preferring `want`, then the larger heap.
  auto pick = [&](VkMemoryPropertyFlags need, VkMemoryPropertyFlags want) {
    int best = -1;
    for (std::uint32_t t = 0; t < mp.memoryTypeCount; ++t) {
      const auto f = mp.memoryTypes[t].propertyFlags;
      if ((f & need) != need || (f & odd)) continue;
      if (best < 0) {
        best = static_cast<int>(t);
        continue;
      }
      const auto b = static_cast<std::uint32_t>(best);
      const bool has = (f & want) == want,
                 best_has = (mp.memoryTypes[b].propertyFlags & want) == want;
      if ((has && !best_has) || (has == best_has && heap_size(t) > heap_size(b)))
        best = static_cast<int>(t);
    }
    return best;
  };
  memory_choice c;
  const int upload = pick(host, cached);
  if (upload < 0) throw error("device", "no HOST_VISIBLE|HOST_COHERENT memory type", device);
  c.upload_type = static_cast<std::uint32_t>(upload);
  const int mapped = force_staging ? -1 : pick(local | host, 0);
  if (mapped >= 0) {
    c.device_type = static_cast<std::uint32_t>(mapped);
    c.device_mapped = true;
    return c;
  }
  const int device_local = pick(local, 0);
  if (device_local >= 0) {
    c.device_type = static_cast<std::uint32_t>(device_local);
    c.device_mapped = false;
    return c;
  }
  // No DEVICE_LOCAL type at all (unusual): host memory serves, mapped unless forced not to.
  c.device_type = c.upload_type;
  c.device_mapped = !force_staging;
  return c;
}

// A buffer over its own memory, mapped if asked. Out-of-memory comes back as the VkResult
// (so callers can free caches and retry); any other failure throws.
inline VkResult make_buffer(const device_functions& fn, VkDevice device, VkDeviceSize bytes,
                            std::uint32_t memory_type, bool map, chunk_memory& out,
                            const std::string& device_name) {
  auto bi = make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  out = {};
  VkBuffer buffer = VK_NULL_HANDLE;
  VkResult r = fn.vkCreateBuffer(device, &bi, nullptr, &buffer);
  if (out_of_memory(r)) return r;
  check(r, "vkCreateBuffer", device_name);
  VkMemoryRequirements req{};
  fn.vkGetBufferMemoryRequirements(device, buffer, &req);
  if (!(req.memoryTypeBits & (1u << memory_type))) {
    fn.vkDestroyBuffer(device, buffer, nullptr);
    throw error("vulkan", "the chosen memory type cannot hold storage buffers",
                "memory type " + std::to_string(memory_type) + ", device " + device_name);
  }
  auto ai = make<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = memory_type;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  const char* step = "vkAllocateMemory";
  r = fn.vkAllocateMemory(device, &ai, nullptr, &memory);
  if (r == VK_SUCCESS) {
    step = "vkBindBufferMemory";
    r = fn.vkBindBufferMemory(device, buffer, memory, 0);
  }
  void* p = nullptr;
  if (r == VK_SUCCESS && map) {
    step = "vkMapMemory";
    r = fn.vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &p);
  }
  if (r != VK_SUCCESS) {
    fn.vkDestroyBuffer(device, buffer, nullptr);
    if (std::string_view(step) != "vkAllocateMemory") fn.vkFreeMemory(device, memory, nullptr);
    if (out_of_memory(r) || r == VK_ERROR_MEMORY_MAP_FAILED) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    check(r, step, device_name);
  }
  out = {buffer, memory, static_cast<std::byte*>(p)};
  return VK_SUCCESS;
}

inline void free_buffer(const device_functions& fn, VkDevice device,
                        const chunk_memory& m) noexcept {
  if (m.buffer) fn.vkDestroyBuffer(device, m.buffer, nullptr);
  if (m.memory) fn.vkFreeMemory(device, m.memory, nullptr); // unmaps too
}

} // namespace kiln::jit::vk
