# Resolves SC_WITH_CUDA / SC_WITH_NCCL (AUTO|ON|OFF) into SC_HAVE_CUDA,
# SC_HAVE_NCCL, SC_FEATURE_DEFINES and SC_FEATURE_LIBS.  AUTO looks in
# /usr/local/cuda as well as the usual places; ON fails the configure when
# the toolkit is missing, so that a requested feature is never silently off.
set(SC_HAVE_CUDA OFF)
set(SC_HAVE_NCCL OFF)
set(SC_FEATURE_DEFINES "")
set(SC_FEATURE_LIBS "")
set(SC_PC_PRIVATE_LIBS "")

foreach(opt SC_WITH_CUDA SC_WITH_NCCL)
  if(NOT ${opt} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${opt} must be AUTO, ON or OFF, not '${${opt}}'")
  endif()
endforeach()

if(NOT SC_WITH_CUDA STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(SC_HAVE_CUDA ON)
    list(APPEND SC_FEATURE_DEFINES SC_HAVE_CUDA)
    list(APPEND SC_FEATURE_LIBS CUDA::cudart)
    string(APPEND SC_PC_PRIVATE_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
  elseif(SC_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SC_WITH_CUDA=ON but no CUDA toolkit was found "
                        "(looked in /usr/local/cuda and CUDAToolkit_ROOT)")
  endif()
endif()

if(NOT SC_WITH_NCCL STREQUAL "OFF")
  if(SC_HAVE_CUDA)
    find_path(SC_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(SC_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  endif()
  if(SC_HAVE_CUDA AND SC_NCCL_INCLUDE AND SC_NCCL_LIBRARY)
    set(SC_HAVE_NCCL ON)
    list(APPEND SC_FEATURE_DEFINES SC_HAVE_NCCL)
    list(APPEND SC_FEATURE_LIBS ${SC_NCCL_LIBRARY})
    get_filename_component(sc_nccl_dir ${SC_NCCL_LIBRARY} DIRECTORY)
    string(APPEND SC_PC_PRIVATE_LIBS " -L${sc_nccl_dir} -lnccl")
    include_directories(SYSTEM ${SC_NCCL_INCLUDE})
  elseif(SC_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "SC_WITH_NCCL=ON but NCCL (nccl.h, libnccl) and the CUDA "
                        "toolkit it needs were not both found")
  endif()
endif()
