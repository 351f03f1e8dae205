# tpla_install.cmake - install the library (shared and static), the header,
# the tool, a CMake package and a pkg-config file:
#   find_package(tpla)  ->  tpla::tpla (shared), tpla::tpla_static
#   pkg-config --cflags --libs tpla             (shared)
#   pkg-config --cflags --static --libs tpla    (static: Libs.private lists
#                                                CUDA, NCCL, BLAS, pthread, m)
# The static library carries its link dependencies: the exported
# tpla::tpla_static links CUDA::cudart/cublasLt (so tplaConfig.cmake finds
# CUDAToolkit in a CUDA build), NCCL, BLAS, Threads and libm.
include(CMakePackageConfigHelpers)

# Installed binaries find the CUDA/NCCL/BLAS libraries they were linked with
# even where those are outside the loader's default path.
set_target_properties(tpla tpla_tool PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS tpla tpla_static EXPORT tplaTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tpla_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/tpla.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The .cu objects in libtpla.a are C++ (static-local guards, the exception
# personality): a C program linking the static library needs libstdc++, which
# nvcc links implicitly for the shared library.
set(TPLA_STATIC_EXTRA_LIBS "")
if(TPLA_CUDA)
  set(TPLA_STATIC_EXTRA_LIBS stdc++)
  target_link_libraries(tpla_static PRIVATE ${TPLA_STATIC_EXTRA_LIBS})
endif()

# ---- CMake package -----------------------------------------------------------
set(TPLA_PACKAGE_CUDA OFF)
set(TPLA_PACKAGE_CUDA_ROOT "")
if(TPLA_CUDA)
  set(TPLA_PACKAGE_CUDA ON)
  get_filename_component(TPLA_PACKAGE_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
install(EXPORT tplaTargets NAMESPACE tpla:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpla)
configure_package_config_file(cmake/tplaConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tplaConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpla)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tplaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tplaConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tplaConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpla)

# ---- pkg-config ----------------------------------------------------------------
# Libs.private: the static library's dependencies as -L/-l flags, from the
# same list the library links (TPLA_LINK_LIBS): imported targets through
# their library files, full paths split into -L<dir> -l<name>.
function(tpla_pc_flags out)
  set(flags "")
  foreach(lib IN LISTS ARGN)
    if(lib STREQUAL "Threads::Threads")
      list(APPEND flags "-pthread")
      continue()
    endif()
    set(file "${lib}")
    if(TARGET "${lib}")
      get_target_property(file "${lib}" IMPORTED_LOCATION)
      if(NOT file)
        get_target_property(file "${lib}" IMPORTED_LOCATION_RELEASE)
      endif()
      if(NOT file)
        message(WARNING "tpla.pc: no library file for ${lib}; left out of Libs.private")
        continue()
      endif()
    endif()
    if(IS_ABSOLUTE "${file}")
      get_filename_component(dir "${file}" DIRECTORY)
      get_filename_component(name "${file}" NAME_WE)
      string(REGEX REPLACE "^lib" "" name "${name}")
      if(NOT dir MATCHES "^(/usr)?/lib(64)?(/${CMAKE_LIBRARY_ARCHITECTURE})?$")
        list(APPEND flags "-L${dir}")
      endif()
      list(APPEND flags "-l${name}")
    elseif(file MATCHES "^-")
      list(APPEND flags "${file}")
    else()
      list(APPEND flags "-l${file}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  list(JOIN flags " " flags)
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

tpla_pc_flags(TPLA_PC_PRIVATE_LIBS ${TPLA_LINK_LIBS} ${TPLA_STATIC_EXTRA_LIBS})
# The prefix is found relative to the installed tpla.pc, so the file stays
# right after `cmake --install --prefix <elsewhere>` or a move.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TPLA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _tpla_pc_up "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
  string(REGEX REPLACE "/$" "" _tpla_pc_up "${_tpla_pc_up}")
  set(TPLA_PC_PREFIX "\${pcfiledir}/${_tpla_pc_up}")
endif()
configure_file(cmake/tpla.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tpla.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tpla.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
