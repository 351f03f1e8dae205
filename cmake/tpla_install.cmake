# tpla_install.cmake - install the library, header, tool, a pkg-config file
# and a CMake package (find_package(tpla) gives tpla::tpla).
include(CMakePackageConfigHelpers)

install(TARGETS tpla tpla_static EXPORT tplaTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tpla_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/tpla.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT tplaTargets NAMESPACE tpla:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpla)
configure_package_config_file(cmake/tplaConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tplaConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpla)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tplaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tplaConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tplaConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tpla)

set(TPLA_PC_PRIVATE_LIBS "-lpthread -lm")
configure_file(cmake/tpla.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tpla.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tpla.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
